from scheduler import DeadlinePolicy, one_at_a_time


def test_my_solver(check_solver):
    check_solver(one_at_a_time)


def test_my_policy(check_policy):
    check_policy(DeadlinePolicy, deadlines=True)
