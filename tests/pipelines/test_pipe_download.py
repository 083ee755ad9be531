"""Downloads resume with HTTP ranges and are checked against published or first-seen digests."""
import hashlib
import http.server
import json
import threading

import pytest

from pipeline_helpers import load_script

dl = load_script("scripts/data/download.py")
PAYLOAD = bytes(range(256)) * 400  # 100 kB


class RangeHandler(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def do_GET(self):  # noqa: N802 (http.server API)
        start = 0
        rng = self.headers.get("Range")
        RangeHandler.requests.append(rng)
        if rng:
            start = int(rng.split("=")[1].rstrip("-"))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}")
        else:
            self.send_response(200)
        body = PAYLOAD[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    httpd = http.server.HTTPServer(("127.0.0.1", 0), RangeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    RangeHandler.requests = []
    yield f"http://127.0.0.1:{httpd.server_port}/file.bin"
    httpd.shutdown()


def test_interrupted_download_resumes_from_the_part_file(server, tmp_path):
    dest = tmp_path / "file.bin"
    (tmp_path / "file.bin.part").write_bytes(PAYLOAD[:12345])
    dl.fetch(server, dest, progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert RangeHandler.requests == ["bytes=12345-"]
    assert not (tmp_path / "file.bin.part").exists()


def test_published_digest_is_checked(server, tmp_path):
    path = dl.fetch(server, tmp_path / "f.bin", progress=False)
    good = dl.Source(server, "f.bin", md5=hashlib.md5(PAYLOAD).hexdigest(), sha256=hashlib.sha256(PAYLOAD).hexdigest())
    dl.verify(path, good, tmp_path / "checksums.lock")
    with pytest.raises(ValueError, match="MD5 differs"):
        dl.verify(path, dl.Source(server, "f.bin", md5="0" * 32), tmp_path / "checksums.lock")


def test_first_seen_digest_is_recorded_and_enforced(server, tmp_path):
    lock = tmp_path / "checksums.lock"
    (tmp_path / "c").mkdir()
    path = dl.fetch(server, tmp_path / "c" / "f.bin", progress=False)
    dl.verify(path, dl.Source(server, "f.bin"), lock)
    assert json.loads(lock.read_text()) == {"c/f.bin": hashlib.sha256(PAYLOAD).hexdigest()}
    path.write_bytes(PAYLOAD[:-1])  # the file changed (upstream or on disk)
    with pytest.raises(ValueError, match="differs from"):
        dl.verify(path, dl.Source(server, "f.bin"), lock)


def test_every_corpus_has_sources_and_unknown_ones_are_named(tmp_path):
    prep = load_script("scripts/data/prepare_mt.py")
    extract = load_script("scripts/data/extract.py")
    assert set(prep.RECIPES) <= set(dl.CORPORA) and set(prep.RECIPES) <= set(extract.EXTRACTORS)
    with pytest.raises(KeyError, match="klingon"):
        dl.download("klingon", tmp_path)
