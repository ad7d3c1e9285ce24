import resource

import numpy as np

import rill.graph as rg
from rill.exec import Session
from rill.exec.memory import tune_malloc


def test_no_page_faults_in_steady_state(graph):
    x = rg.placeholder(rg.float32, [1024, 1024], name="x")
    y = rg.tanh(x * 2.0) + 1.0  # 4 MB intermediates, allocated and freed every step
    xv = np.ones((1024, 1024), np.float32)
    with Session() as sess:
        assert tune_malloc()
        for _ in range(3):
            sess.run(y, {x: xv})
        # The fewest faults of three windows of ten steps: the process's other threads and
        # libraries fault a page now and then (a few hundred in a window, at times, with
        # everything the test suite has loaded); fresh pages for the step's arrays would show
        # in every window.
        windows = []
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for _ in range(10):
                sess.run(y, {x: xv})
            windows.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    assert min(windows) < 200, windows  # fresh pages for every 4 MB array: thousands a step
