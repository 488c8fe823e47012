"""The maps of one batch as the analysis tools make them, with each layer's input to its
attention, for tests that recompute a selection from that input."""

from ssan_plugin.analysis.maps import batch_maps, collate


def maps_and_inputs(task, model, sents):
    """The maps of one left-padded batch, each layer's input to the attention (T x B x C), and
    the non-pad mask (B x T)."""
    pad = task.source_dictionary.pad()
    inputs = {}

    def grab(index):
        def hook(module, args, kwargs):
            inputs[index] = kwargs["query"].detach()
        return hook

    layers = model.encoder.layers
    handles = [layers[i].self_attn.register_forward_pre_hook(grab(i), with_kwargs=True)
               for i in range(len(layers))]
    try:
        tokens, lengths = collate(sents, pad)
        maps = batch_maps(model, tokens, lengths, pad)
    finally:
        for h in handles:
            h.remove()
    return maps, inputs, tokens.ne(pad)
