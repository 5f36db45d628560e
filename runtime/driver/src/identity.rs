//! Who drives: the machine's name and a driver's owner id, as leases and agent runs record
//! them.

/// This machine's host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `localhost`).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// A new owner id: `host/pid/8 hex digits`, unique to one driver of one process.
pub fn owner_id(host: &str, seed: u128) -> String {
    format!("{host}/{}/{:08x}", std::process::id(), seed as u32)
}

/// The host part of an owner id.
pub fn host_of(owner: &str) -> &str {
    owner.split('/').next().unwrap_or(owner)
}
