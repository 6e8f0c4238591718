import unittest

import stats


class StatsTest(unittest.TestCase):
    def test_mean_and_spread(self):
        self.assertEqual(stats.mean([1, 2, 3]), 2)
        self.assertAlmostEqual(stats.spread([1, 2, 3]), 1.0)
        self.assertEqual(stats.spread([5]), 0.0)

    def test_describe(self):
        self.assertEqual(stats.describe([1, 2]), "n=2, mean=1.50")

    def test_callers_write_to_stderr_through_stats(self):
        # Callers use `stats.sys.stderr`: the import is not unused.
        self.assertIs(stats.sys.stderr, __import__("sys").stderr)


if __name__ == "__main__":
    unittest.main()
