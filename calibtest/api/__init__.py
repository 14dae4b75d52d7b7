"""The front doors: calib_ci, calib_test and evidence, tcal_test, calib_compare, calib_power and calib_sample_size."""
