"""Model hooks (``onmt.model_builder``, ``onmt.modules``): our generator and attention normalizers
installed on the built model, loading for translation, and the attention modules' forward calls."""
