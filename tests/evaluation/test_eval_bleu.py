"""BLEU: tokenized BLEU is multi-bleu.perl's (no smoothing, no re-tokenization); SacreBLEU keeps its signature."""
import math
from collections import Counter

import pytest

from onmt_entmax.evaluation import bleu


def _bleu4(hyp: list[list[str]], ref: list[list[str]]) -> float:
    """Papineni et al. corpus BLEU-4, one reference, no smoothing, written out from the definition."""
    logs = []
    for n in range(1, 5):
        match = total = 0
        for h, r in zip(hyp, ref):
            hc = Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
            rc = Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
            match += sum(min(c, rc[g]) for g, c in hc.items())
            total += max(len(h) - n + 1, 0)
        if match == 0:
            return 0.0
        logs.append(math.log(match / total))
    hl, rl = sum(map(len, hyp)), sum(map(len, ref))
    bp = 1.0 if hl > rl else math.exp(1 - rl / hl)
    return 100 * bp * math.exp(sum(logs) / 4)


def test_tokenized_bleu_is_corpus_bleu_of_the_given_tokens():
    hyp = ["the cat sat on the mat .", "a dog 's toy is n't here", "we do n't know"]
    ref = ["the cat sat on a mat .", "the dog 's toy is n't here", "we do n't know it"]
    expected = _bleu4([h.split() for h in hyp], [r.split() for r in ref])
    assert bleu.tokenized_bleu(hyp, ref) == pytest.approx(expected, abs=1e-9)


def test_tokenized_bleu_does_not_smooth():
    # no matching 4-gram: multi-bleu.perl gives 0; SacreBLEU's default exp smoothing would not
    assert bleu.tokenized_bleu(["a b c"], ["a b c"]) == 0.0
    assert bleu.tokenized_bleu(["a b c d"], ["a b c d"]) == pytest.approx(100.0)


def test_tokenized_bleu_does_not_retokenize():
    # "n't" vs "not": different tokens stay different, punctuation glued to words is not split
    assert bleu.tokenized_bleu(["it is n't red ."], ["it is n't red ."]) == pytest.approx(100.0)
    assert bleu.tokenized_bleu(["it is n't red."], ["it is n't red ."]) < 100.0


def test_remove_bpe():
    assert bleu.remove_bpe("walk@@ ed to the st@@ ation@@") == "walked to the station"
    assert bleu.remove_bpe("no subwords\n") == "no subwords"


def test_sacrebleu_detokenized_with_signature():
    hyps = bleu.moses_detokenize(["Hello , world !", "It 's fine ."], "en")
    assert hyps == ["Hello, world!", "It's fine."]
    score, signature = bleu.sacrebleu_score(hyps, ["Hello, world!", "It's fine."], "en")
    assert score == pytest.approx(100.0)
    assert "tok:13a" in signature and "case:mixed" in signature and "nrefs:1" in signature


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        bleu.tokenized_bleu(["a", "b"], ["a"])


@pytest.mark.parametrize("lang,tokenizer", [("ja", "ja-mecab"), ("zh", "zh"), ("ko", "ko-mecab"), ("en", "13a"),
                                            ("de", "13a"), ("ro", "13a")])
def test_sacrebleu_tokenizes_as_its_command_line_does_for_the_target_language(monkeypatch, lang, tokenizer):
    """Japanese targets are scored with MeCab's segmentation (ja-mecab), as `sacrebleu -l en-ja` does: 13a
    would count a whole unsegmented Japanese sentence as one token."""
    chosen, real = [], bleu.BLEU

    def spy(**kw):
        chosen.append(kw["tokenize"])  # (MeCab may be absent here: score with a stand-in tokenizer)
        return real(**{**kw, "tokenize": "char" if kw["tokenize"].endswith("mecab") else kw["tokenize"]})

    monkeypatch.setattr(bleu, "BLEU", spy)
    score, _ = bleu.sacrebleu_score(["猫 が 座った 。"], ["猫 が 座った 。"], tgt_lang=lang)
    assert chosen == [tokenizer] and score == pytest.approx(100.0)


def test_japanese_without_mecab_is_a_clear_error_naming_the_tokenizer():
    try:
        import MeCab  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match=r"tokenizer 'ja-mecab' for target language 'ja' is not available.*"
                                               r"sacrebleu\[ja\]"):
            bleu.sacrebleu_score(["猫が座った"], ["猫が座った"], tgt_lang="ja")
    else:
        _, signature = bleu.sacrebleu_score(["猫が座った"], ["猫が座った"], tgt_lang="ja")
        assert "tok:ja-mecab" in signature
