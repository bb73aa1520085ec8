"""Training the book's runs (:mod:`gtalib.book.schedule`)."""

import pytest

from gtalib.book import schedule


def test_train_all_rejects_bad_input():
    with pytest.raises(ValueError, match="jobs"):
        schedule.train_all([], "/nonexistent", jobs=0)
