import threading
import time

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer.utils.map_in_order import map_in_order


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_in_order_with_at_most_workers_calls_at_once(workers):
    lock, running, most = threading.Lock(), [0], [0]

    def slow_square(x):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01 * (x % 3))  # later items may finish first
        with lock:
            running[0] -= 1
        return x * x

    assert list(map_in_order(slow_square, range(12), workers)) == [x * x for x in range(12)]
    assert most[0] <= workers
    if workers > 1:
        assert most[0] > 1  # the calls did overlap


@BACKEND_INDEPENDENT
def test_items_are_read_as_results_are_taken_and_errors_surface_in_order():
    read = []

    def items():
        for x in range(10):
            read.append(x)
            yield x

    results = map_in_order(lambda x: 1 / (x - 5), items(), workers=2)
    assert next(results) == -0.2
    time.sleep(0.05)
    assert len(read) <= 4  # two running, one waiting, and the one taken
    assert [next(results) for _ in range(4)] == [-0.25, -1 / 3, -0.5, -1.0]
    with pytest.raises(ZeroDivisionError):
        next(results)
