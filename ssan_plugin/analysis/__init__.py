"""Analysis of trained models (examples/analysis/README.md): ``selection`` (selection maps and
rates of selective encoders), ``inputs`` (text encoded as the data-bin was), ``maps`` (per-head
selection and attention), ``word_classes``, ``probing_data``, ``probe``, ``trees`` (split-point
tree induction and span scoring), ``tools`` (the scripts' workflows)."""
