"""The names of the beam search's length penalty rules, importable without a backend."""

# How a finished hypothesis is ranked: log_prob / penalty(length), length counting the EOS.
# "gnmt" (paper 6.1): ((5 + length) / 6) ** alpha; "average": length ** alpha, the
# `length_penalty` of Hugging Face transformers and fairseq (alpha 1: the mean log-prob).
LENGTH_PENALTY_RULES = ("gnmt", "average")
