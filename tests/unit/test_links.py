"""ktinfra.links: the one rule for writing through a path that may be a link."""

import errno

import pytest

from ktinfra.links import LinkLoop, written_file


def test_plain_path_is_itself(tmp_path):
    assert written_file(tmp_path / "new.yml") == tmp_path / "new.yml"


def test_link_to_a_file_leads_to_the_file(tmp_path):
    (tmp_path / "real.yml").write_text("x")
    (tmp_path / "link.yml").symlink_to("real.yml")
    assert written_file(tmp_path / "link.yml") == (tmp_path / "real.yml").resolve()


def test_dangling_link_leads_to_the_file_it_will_create(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.yml").symlink_to("sub/later.yml")
    assert written_file(tmp_path / "link.yml") == (tmp_path / "sub").resolve() / "later.yml"


def test_loop_is_an_oserror_naming_the_path(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(LinkLoop) as caught:
        written_file(tmp_path / "a")
    assert isinstance(caught.value, OSError) and caught.value.errno == errno.ELOOP
    assert str(caught.value) == f"{tmp_path / 'a'} is a link that leads back to itself (a loop of links)"
