"""The readers: each input form (UCI files, a vector column, raw text) as a
:class:`~sparklda.corpus.source.DocSource`."""

from .files import decode_text, read_vocab
from .text import from_text, load_text_dataframe
from .uci import read_uci
from .vectors import (
    check_output_column,
    check_vector_column,
    declared_size,
    from_vectors,
    vector_size,
    vector_to_arrays,
    vectors_to_pack,
)

__all__ = [
    "check_output_column",
    "check_vector_column",
    "declared_size",
    "decode_text",
    "from_text",
    "from_vectors",
    "load_text_dataframe",
    "read_uci",
    "read_vocab",
    "vector_size",
    "vector_to_arrays",
    "vectors_to_pack",
]
