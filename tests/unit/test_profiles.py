import pytest

from ktinfra import profiles


def test_both_generations_ship():
    names = profiles.list_profiles()
    assert "kt-0.7" in names and "kt-0.4-autodl" in names
    assert profiles.load_profile("kt-0.7")["generation"] == "current"
    assert profiles.load_profile("kt-0.4-autodl")["generation"] == "legacy"


def test_unknown_profile_is_refused_with_the_known_names():
    with pytest.raises(profiles.UnknownProfileError, match="kt-0.7"):
        profiles.load_profile("kt-9.9")
