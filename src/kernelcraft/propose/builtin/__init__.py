"""The built-in kernel engineer: a proposer that needs no model endpoint."""
