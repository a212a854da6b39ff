//! Which channels a session wants: a pure function of the interfaces on both ends.
