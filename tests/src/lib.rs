//! Test harness: drives tests/testbed/testbed.sh.
