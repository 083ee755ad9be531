"""valid_batches_once: onmt_train reads its validation corpus once and replays its batches at every
later validation (onmt_entmax/onmt/training/valid_batches.py)."""
from onmt_testkit import build_vocab, train, yaml_config


def test_onmt_train_reads_the_validation_corpus_once_for_every_validation(toy, monkeypatch):
    from onmt.inputters.text_corpus import ParallelCorpus
    from onmt.trainer import Trainer

    reads, validations = [], []
    load, validate = ParallelCorpus.load, Trainer.validate

    def counted_load(self, offset=0, stride=1):
        reads.append(self.id)
        return load(self, offset, stride)

    def recorded_validate(self, valid_iter, moving_average=None):
        stats = validate(self, valid_iter, moving_average)
        validations.append((stats.n_words, stats.n_correct))
        return stats

    monkeypatch.setattr(ParallelCorpus, "load", counted_load)
    monkeypatch.setattr(Trainer, "validate", recorded_validate)
    model = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8,
                 generator_function="entmax15", global_attention_function="entmax15")
    config = yaml_config(toy, model, steps=6, extra="valid_steps: 2\n")
    build_vocab(config)
    train(config)
    assert len(validations) == 3 and reads.count("valid") == 1
    assert len({words for words, _ in validations}) == 1  # every validation saw every target word
    assert validations[0][0] == sum(len(line.split()) + 1 for line in (toy / "tgt-valid.txt").read_text().splitlines())
