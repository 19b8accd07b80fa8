"""Helpers of the command modules that decide before any work is done: bad input as one line, nothing made."""

import os

import pytest
from seriestool.commands import checkout
from seriestool.errors import SeriesError


def test_a_checkout_folder_that_cannot_be_made_is_one_line_not_an_errno(tmp_path):
    # before: `series: error: [Errno 20] Not a directory: ...` (or [Errno 13]/[Errno 30] in a read-only place)
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(SeriesError) as info:
        checkout.make_staging(blocker / "co")
    message = str(info.value)
    assert message.startswith(f"cannot make the checkout {blocker / 'co'}: ") and message.endswith(
        "pick another --dir"
    )
    assert "[Errno" not in message
    staging = checkout.make_staging(tmp_path / "sub" / "co")
    assert staging.parent == tmp_path / "sub" and staging.name.startswith(".co.")
    os.rmdir(staging)
