"""Reference-variable ops: none takes a placeholder's value, so their gradient check lives in
tests/exec/test_ref_variable_kernels.py."""

from op_samples import NO_SAMPLE

NO_SAMPLE["RefIdentity"] = (
    "its input is a variable reference (VariableV2), which a placeholder cannot stand for; "
    "test_ref_identity_gradient_reaches_the_variable checks dx = g"
)
