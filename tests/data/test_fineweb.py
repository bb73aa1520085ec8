"""FineWeb-Edu path on a local folder in the hub layout, and fast, clear failure when the hub is unreachable."""
import time

import pytest

from gtalib.data.build import load_manifest
from gtalib.data.fineweb import HubUnavailable, build_fineweb, check_hub, iter_documents

README = """---
license: odc-by
configs:
- config_name: sample-10BT
  data_files:
  - split: train
    path: sample/10BT/*
- config_name: sample-100BT
  data_files:
  - split: train
    path: sample/100BT/*
---
# FineWeb-Edu (test fixture)
"""


@pytest.fixture
def local_fineweb(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    (tmp_path / "README.md").write_text(README)
    for config, n in (("10BT", 30), ("100BT", 5)):
        folder = tmp_path / "sample" / config
        folder.mkdir(parents=True)
        for part in range(2):
            ids = [f"<urn:{config}:{part}:{i}>" for i in range(n)]
            texts = [f"Document {part}-{i} of {config}: photosynthesis turns light into sugar." for i in range(n)]
            table = pa.table({"text": texts, "id": ids, "score": [3.0] * n})
            pq.write_table(table, folder / f"{part:03d}_00000.parquet")
    return tmp_path


def test_local_folder_reads_the_config(local_fineweb):
    docs = list(iter_documents("sample-10BT", local_fineweb))
    assert len(docs) == 60
    assert docs[0] == ("<urn:10BT:0:0>", "Document 0-0 of 10BT: photosynthesis turns light into sugar.")
    assert {d[0].split(":")[1] for d in docs} == {"10BT"}
    assert len(list(iter_documents("sample-100BT", local_fineweb))) == 10


def test_build_fineweb_local_with_budget(local_fineweb, tmp_path):
    out = build_fineweb("sample-10BT", "bytes", local_fineweb, max_tokens=1000, data_dir=tmp_path / "cache")
    m = load_manifest(out)
    (src,) = m["sources"]
    assert out.name == "fineweb-edu-sample-10BT-bytes" and src["name"] == "fineweb-edu"
    docs = [t for _, t in iter_documents("sample-10BT", local_fineweb)]
    # the first documents until their bytes + one eot each reach the budget
    n, k = 0, 0
    while n < 1000:
        n += len(docs[k].encode()) + 1
        k += 1
    assert src["train"]["tokens"] + src["val"]["tokens"] == n
    assert src["train"]["documents"] + src["val"]["documents"] == k
    assert src["version"] == "sample-10BT@local" and len(src["sha256"]) == 64


def test_bad_config():
    with pytest.raises(ValueError, match="sample-100BT.*sample-10BT"):
        list(iter_documents("sample-1BT", "."))


def test_offline_hub_fails_fast_with_advice(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(HubUnavailable, match="local folder"):
        build_fineweb("sample-10BT", "bytes")
    assert time.perf_counter() - t0 < 2.0


def test_unreachable_hub_fails_fast(monkeypatch):
    import huggingface_hub.constants as c

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(c, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    t0 = time.perf_counter()
    with pytest.raises(HubUnavailable, match="cannot reach the Hugging Face hub.*local folder"):
        check_hub(timeout=2.0)
    assert time.perf_counter() - t0 < 5.0


def test_the_cli_says_the_hub_is_offline_in_one_line(monkeypatch, tmp_path, capsys):
    """`gtalib data build --corpus fineweb-edu` offline: exit 2 and the advice, no traceback."""
    from gtalib.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["data", "build", "--corpus", "fineweb-edu", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error: the Hugging Face hub is disabled" in err
    assert "local folder" in err
