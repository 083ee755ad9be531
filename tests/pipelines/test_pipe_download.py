"""download.py against a local HTTP server serving small archives made here: published digests accepted
and refused, a cut connection resumed with Range requests, a 404 answered by the fallback URL."""
import hashlib
import http.server
import io
import json
import shutil
import subprocess
import tarfile
import threading

import pytest

from pipeline_helpers import SHARED, load_script, needs_shared

dl = load_script("scripts/data/download.py")


def _tgz(files: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# incompressible enough to span many 64 kB reads
ARCHIVE = _tgz({f"corpus/part{i}.de-en.{lang}": "".join(f"{lang} {i} {j} {hash((i, j, lang))}\n" for j in range(3000))
                for i in range(2) for lang in ("de", "en")})
MD5, SHA256 = hashlib.md5(ARCHIVE).hexdigest(), hashlib.sha256(ARCHIVE).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.routes[path]``: {"body": bytes, "status": 404?, "cut_at": byte offset at which the
    first transfer drops the connection, "ignore_range": answer 200 with the whole file}."""

    def do_GET(self):  # noqa: N802 (http.server API)
        route = self.server.routes.get(self.path)
        rng = self.headers.get("Range")
        self.server.log.append((self.path, rng))
        if route is None or route.get("status") == 404:
            self.send_error(404)
            return
        body, start = route["body"], 0
        if rng and not route.get("ignore_range"):
            start = int(rng.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        cut = route.get("cut_at")
        if cut is not None and start < cut:  # announce the whole rest, send part of it, hang up (once)
            route["cut_at"] = None
            self.wfile.write(body[start:cut])
            return
        self.wfile.write(body[start:])

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.routes, httpd.log = {}, []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    httpd.url = lambda path: f"http://127.0.0.1:{httpd.server_port}{path}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _corpus(monkeypatch, *alternatives):
    monkeypatch.setitem(dl.CORPORA, "fake", [tuple(alternatives)])


def test_published_digest_and_size_accept_the_archive(server, tmp_path, monkeypatch):
    server.routes["/a.tgz"] = {"body": ARCHIVE}
    _corpus(monkeypatch, dl.Source(server.url("/a.tgz"), "a.tgz", md5=MD5, sha256=SHA256, size=len(ARCHIVE),
                                   pinned_by="this test"))
    dl.main(["fake", "--out", str(tmp_path), "--no-progress"])
    assert (tmp_path / "fake/a.tgz").read_bytes() == ARCHIVE
    assert tarfile.open(tmp_path / "fake/a.tgz").getnames()[0] == "corpus/part0.de-en.de"
    assert not (tmp_path / "fake/a.tgz.part").exists()
    dl.main(["fake", "--out", str(tmp_path), "--no-progress"])  # already here: checked, not fetched again
    assert len(server.log) == 1


def test_digest_mismatch_is_refused_in_one_line_and_no_verify_accepts(server, tmp_path, monkeypatch, capsys):
    server.routes["/a.tgz"] = {"body": ARCHIVE}
    wrong = "0" * 64
    _corpus(monkeypatch, dl.Source(server.url("/a.tgz"), "a.tgz", sha256=wrong, pinned_by="a reference"))
    with pytest.raises(SystemExit) as err:
        dl.main(["fake", "--out", str(tmp_path), "--no-progress"])
    msg = str(err.value)
    assert "\n" not in msg and "fake/a.tgz" in msg and SHA256 in msg and wrong in msg and "--no-verify" in msg
    assert not (tmp_path / "fake/a.tgz").exists() and not (tmp_path / "fake/a.tgz.part").exists()
    assert (tmp_path / "fake/a.tgz.rejected").read_bytes() == ARCHIVE  # kept aside, never as if complete
    dl.main(["fake", "--out", str(tmp_path), "--no-progress", "--no-verify"])
    assert (tmp_path / "fake/a.tgz").read_bytes() == ARCHIVE
    assert SHA256 in capsys.readouterr().err
    assert json.loads((tmp_path / "checksums.lock").read_text()) == {"fake/a.tgz": SHA256}


def test_wrong_size_is_refused_before_the_digest(server, tmp_path, monkeypatch):
    server.routes["/a.tgz"] = {"body": ARCHIVE}
    _corpus(monkeypatch, dl.Source(server.url("/a.tgz"), "a.tgz", md5=MD5, size=len(ARCHIVE) + 1, pinned_by="r"))
    with pytest.raises(dl.DownloadError, match=f"{len(ARCHIVE)} bytes, not the {len(ARCHIVE) + 1}"):
        dl.download("fake", tmp_path, progress=False)


def test_cut_connection_is_resumed_with_a_range_request(server, tmp_path, monkeypatch):
    cut = len(ARCHIVE) // 3
    server.routes["/a.tgz"] = {"body": ARCHIVE, "cut_at": cut}
    _corpus(monkeypatch, dl.Source(server.url("/a.tgz"), "a.tgz", md5=MD5, pinned_by="r"))
    dl.download("fake", tmp_path, progress=False)
    assert (tmp_path / "fake/a.tgz").read_bytes() == ARCHIVE
    assert server.log == [("/a.tgz", None), ("/a.tgz", f"bytes={cut}-")]


def test_a_run_cut_off_leaves_a_part_file_that_the_next_run_resumes(server, tmp_path):
    cut = len(ARCHIVE) // 2
    server.routes["/a.tgz"] = {"body": ARCHIVE, "cut_at": cut}
    dest = tmp_path / "a.tgz"
    with pytest.raises(dl.DownloadError, match="transfer cut 1 times"):
        dl.fetch(server.url("/a.tgz"), dest, progress=False, retries=0)
    assert not dest.exists() and (tmp_path / "a.tgz.part").stat().st_size == cut
    dl.fetch(server.url("/a.tgz"), dest, progress=False, retries=0)
    assert dest.read_bytes() == ARCHIVE and server.log[-1] == ("/a.tgz", f"bytes={cut}-")


def test_server_ignoring_the_range_restarts_the_file(server, tmp_path):
    server.routes["/a.tgz"] = {"body": ARCHIVE, "ignore_range": True}
    (tmp_path / "a.tgz.part").write_bytes(ARCHIVE[:1000])
    dl.fetch(server.url("/a.tgz"), tmp_path / "a.tgz", progress=False)
    assert (tmp_path / "a.tgz").read_bytes() == ARCHIVE


def test_404_on_the_primary_url_falls_back_to_the_mirror(server, tmp_path, monkeypatch, capsys):
    server.routes["/mirror/a.tgz"] = {"body": ARCHIVE}
    _corpus(monkeypatch,
            dl.Source(server.url("/gone/a.tgz"), "a.tgz", md5=MD5, pinned_by="r"),
            dl.Source(server.url("/mirror/a.tgz"), "a-mirror.tgz", md5=MD5, pinned_by="r"))
    assert dl.download("fake", tmp_path, progress=False) == [tmp_path / "fake/a-mirror.tgz"]
    assert (tmp_path / "fake/a-mirror.tgz").read_bytes() == ARCHIVE
    assert not (tmp_path / "fake/a.tgz").exists() and not (tmp_path / "fake/a.tgz.part").exists()
    assert "HTTP 404" in capsys.readouterr().err
    assert [p for p, _ in server.log] == ["/gone/a.tgz", "/mirror/a.tgz"]


def test_every_url_failing_names_each_failure(server, tmp_path, monkeypatch):
    server.routes["/bad.tgz"] = {"body": b"<html>login</html>"}  # a portal page instead of the archive
    _corpus(monkeypatch, dl.Source(server.url("/bad.tgz"), "a.tgz", md5=MD5, pinned_by="r"),
            dl.Source(server.url("/gone.tgz"), "b.tgz", md5=MD5, pinned_by="r"))
    with pytest.raises(dl.DownloadError) as err:
        dl.download("fake", tmp_path, progress=False)
    assert f"differs from {MD5}" in str(err.value) and "/gone.tgz: HTTP 404" in str(err.value)


def test_unpinned_file_must_keep_the_bytes_of_its_first_download(server, tmp_path, monkeypatch):
    server.routes["/a.tgz"] = {"body": ARCHIVE}
    _corpus(monkeypatch, dl.Source(server.url("/a.tgz"), "a.tgz"))
    dl.download("fake", tmp_path, progress=False)
    assert json.loads((tmp_path / "checksums.lock").read_text()) == {"fake/a.tgz": SHA256}
    (tmp_path / "fake/a.tgz").unlink()
    server.routes["/a.tgz"] = {"body": ARCHIVE[:-1]}  # upstream changed
    with pytest.raises(dl.DownloadError, match="recorded in .*checksums.lock at its first download"):
        dl.download("fake", tmp_path, progress=False)
    assert not (tmp_path / "fake/a.tgz").exists()


def test_every_file_is_pinned_by_a_named_reference_or_marked_unpinned():
    unpinned = set()
    for corpus, files in dl.CORPORA.items():
        for alternatives in files:
            # alternatives saved under one name must be the same bytes (a .part of one is resumed by the other)
            for name in {s.name for s in alternatives}:
                assert len({tuple(s.digests.items()) for s in alternatives if s.name == name}) == 1, name
            for s in alternatives:
                assert s.url.startswith(("http://", "https://")), s
                lengths = {"md5": 32, "sha1": 40, "sha256": 64}
                assert all(len(d) == lengths[a] and int(d, 16) >= 0 for a, d in s.digests.items()), s
                assert bool(s.digests) == bool(s.pinned_by), s  # a pin always names its source, and only a pin
                if not s.digests:
                    unpinned.add((corpus, s.name))
    # no maintained reference publishes a digest for these two (docs/reproduce.md says so)
    assert unpinned == {("iwslt14-de-en", "de-en.tgz"), ("wmt16-ro-en", "setimes2-en-ro.txt.zip")}


def test_every_recipe_has_sources_and_unknown_corpora_are_named(tmp_path):
    prep = load_script("scripts/data/prepare_mt.py")
    extract = load_script("scripts/data/extract.py")
    assert set(prep.RECIPES) <= set(dl.CORPORA) and set(prep.RECIPES) <= set(extract.EXTRACTORS)
    # the WMT dev archives are read for newstest2012 and never as training data
    assert {s.name for s in dl.CORPORA["wmt13-en-ru"][-1]} == set(extract.DEV_ARCHIVES)
    with pytest.raises(KeyError, match="klingon"):
        dl.download("klingon", tmp_path)


@needs_shared("mt-testsets", "iwslt17-de-en")
def test_iwslt17_test_archive_pins_accept_the_released_bytes(tmp_path):
    folder = tmp_path / "iwslt17-de-en-test"
    folder.mkdir()
    for (src,) in dl.CORPORA["iwslt17-de-en-test"]:
        shutil.copy(SHARED / "mt-testsets/iwslt17-de-en" / src.name, folder / src.name)
        dl.verify(folder / src.name, src, tmp_path / "checksums.lock")  # SacreBLEU's MD5 and our SHA-256
        assert (folder / src.name).exists()


@needs_shared("multi30k")
def test_multi30k_pins_accept_the_released_bytes(tmp_path):
    folder = tmp_path / "multi30k"
    folder.mkdir()
    for alternatives in dl.CORPORA["multi30k"]:
        src = alternatives[0]
        shutil.copy(SHARED / "multi30k" / src.name, folder / src.name)
        dl.verify(folder / src.name, src, tmp_path / "checksums.lock")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_corpus_is_checked_out_at_its_pinned_commit(tmp_path):
    repo = tmp_path / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    repo.mkdir()
    subprocess.run([*git, "init", "-q"], check=True)
    commits = []
    for text in ("first", "second"):
        (repo / "f.txt").write_text(text)
        subprocess.run([*git, "add", "f.txt"], check=True)
        subprocess.run([*git, "commit", "-qm", text], check=True)
        commits.append(subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                                      text=True).stdout.strip())
    dest = dl.clone(dl.GitSource(str(repo), commits[0]), tmp_path / "clone")
    assert (dest / "f.txt").read_text() == "first"  # the pin, not the newest commit
    with pytest.raises(dl.DownloadError, match=f"not the pinned {commits[1]}"):
        dl.clone(dl.GitSource(str(repo), commits[1]), dest)
    assert len(dl.GIT["sigmorphon2018"].commit) == 40
