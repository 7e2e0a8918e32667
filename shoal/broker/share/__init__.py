"""Share groups (KIP-932) on the broker side: the per-partition in-flight record state."""
