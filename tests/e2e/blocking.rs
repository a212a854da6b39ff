//! The blocking facade against the testbed (written next).
