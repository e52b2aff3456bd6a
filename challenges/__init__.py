"""What is planned: challenges, activities on the shared clock, targets, the load planner, calendars, injection
plans. (The runs of tests are runs/', what they measured results/'.)"""
