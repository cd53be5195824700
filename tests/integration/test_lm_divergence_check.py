"""lm get-batch localisation through a real check (a sandboxed child); the divergence finder in-process: tests/unit/test_lm_divergence.py."""
import pytest
from harness.selftest import changed_lines
from mutants.lm_export import mutant_single_file, reference_single_file
from mutants.lm_registry import lm_get


@pytest.mark.parametrize("mutant", ["lm-get-batch-targets-not-shifted", "lm-get-batch-one-window"])
def test_get_batch_bugs_are_located_where_the_wrong_values_are_made(mutant, tmp_path):
    """numpy sampling has no torch ops to record: the line whose assigned value first breaks the property."""
    from harness.api import check_file
    text = mutant_single_file(lm_get(mutant))
    f = tmp_path / "mine.py"
    f.write_text(text)
    r = check_file(f, assignment="lm", quick=True)
    top = r["diagnoses"][0]
    assert top["id"] == lm_get(mutant).cause and top["location"] is not None, top
    assert top["location"]["line"] in changed_lines(reference_single_file(), text), top["location"]


def test_a_start_range_that_misses_the_last_window_is_located_at_the_sampling_line(tmp_path):
    from harness.api import check_file
    old = "np.random.randint(0, len(dataset) - context_length, size=batch_size)"
    ref = reference_single_file()
    assert ref.count(old) == 1
    text = ref.replace(old, "np.random.randint(0, len(dataset) - context_length - 1, size=batch_size)")
    f = tmp_path / "mine.py"
    f.write_text(text)
    top = check_file(f, assignment="lm", quick=True)["diagnoses"][0]
    assert top["id"] == "get-batch-start-range" and top["location"] is not None, top
    assert top["location"]["line"] in changed_lines(ref, text), top["location"]
