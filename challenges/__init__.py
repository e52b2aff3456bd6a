"""What is planned and run: challenges, activities on the shared clock, targets, runs of tests."""
