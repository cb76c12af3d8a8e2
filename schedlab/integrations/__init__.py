"""Bridges to other serving systems: each subpackage drives a real system's own code on
schedlab's virtual clock and is optional (its extra installs the system)."""
