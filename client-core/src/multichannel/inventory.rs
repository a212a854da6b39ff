//! Local network interfaces, their link speed and RSS capability, read from the OS.
