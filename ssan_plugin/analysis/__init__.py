"""Analysis of trained models (examples/analysis/README.md): ``selection`` (selection maps and
rates of selective encoders), ``inputs`` (text encoded as the data-bin was), ``maps`` (running
the encoder over sentences: per-head selection and attention), ``word_classes``,
``probing_data``, ``probe``, ``trees`` (split-point tree induction and span scoring), ``tools``
(the scripts' workflows)."""
