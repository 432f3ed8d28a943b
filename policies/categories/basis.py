"""What the rows of a category prove, and what they do not."""

LINEAR_BASIS = (
    "CPU replay of the weight loaders on PyTorch meta tensors with a recording double of the "
    "native namespace: proves which kernel each configuration selects, every candidate's "
    "verdict, the prepared layout, resident bytes and the native entry point and scalar plan "
    "each token count dispatches. Does not prove GPU arithmetic, numerical output, engine "
    "argument validity or that a native kernel was hit on a device."
)

MOE_BASIS = LINEAR_BASIS.replace("weight loaders", "AWQ MoE weight loaders (every expert)")

DFLASH2_POLICY_BASIS = (
    "CPU evaluation of the DFlash2 verifier policy resolution (each row's own variables), the "
    "whole-model verifier qualification and the GDN layer constructor's admission predicates: "
    "proves which verifier options and GDN admissions a configuration gets. Does not prove a "
    "kernel launch, numerics, engine-argument validity or a request-time route hit."
)
