"""`map_in_order`: a function over items on a few threads, results in the items' order."""

import collections
import concurrent.futures


def map_in_order(function, items, workers):
    """Yields `function(item)` for each of `items`, in order, `workers` calls at a time.

    At most `workers` calls run at once and one more result waits, so a long
    stream of items holds only a few results in memory. With one worker the
    calls run in the calling thread. An exception in a call is raised where
    its result is yielded.

    Example:

    >>> list(map_in_order(len, ["a", "bb", "ccc"], workers=2))
    [1, 2, 3]
    """
    if workers == 1:
        yield from map(function, items)
        return
    with concurrent.futures.ThreadPoolExecutor(workers) as executor:
        pending = collections.deque()
        for item in items:
            pending.append(executor.submit(function, item))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
