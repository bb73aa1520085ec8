"""``gtalib book`` reports a failed build as every command reports its errors."""

from gtalib import cli
from gtalib.book.layout import BookError
from gtalib.cli import book as book_cli


def test_a_failed_build_is_one_line_with_the_command_and_exit_status_2(monkeypatch, capsys):
    def failing(*_a, **_k):
        raise BookError("2 notebooks failed: init_ablation, claims (see book/generated/)")

    monkeypatch.setattr(book_cli, "build_book", failing)
    assert cli.main(["book", "--preset", "ci", "--no-train", "--no-html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gtalib book: error: 2 notebooks failed: init_ablation, claims (see book/generated/)"]
