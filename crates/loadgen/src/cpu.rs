//! CPU time of a process (user + system, all threads) from `/proc/PID/stat`, Linux only. Wall-clock
//! throughput on a shared machine depends on whatever else runs there; CPU time spent per request by the
//! server and by this load generator does much less.

use std::time::Duration;

/// `USER_HZ`, the unit of the `utime`/`stime` fields: 100 on every Linux ABI.
const TICKS_PER_SECOND: u64 = 100;

/// CPU time used so far by process `pid` (`None` = this process), or `None` where `/proc` is missing.
pub fn process_cpu(pid: Option<u32>) -> Option<Duration> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// `pid (comm) state ppid ...`: `comm` may hold spaces and parentheses, so fields are counted after the
/// last `)`. There, field 3 (`state`) is index 0, so `utime` (14) and `stime` (15) are 11 and 12.
fn parse_stat(stat: &str) -> Option<Duration> {
    let (_, after_comm) = stat.rsplit_once(')')?;
    let mut fields = after_comm.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis(
        (utime + stime) * 1000 / TICKS_PER_SECOND,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 0 0 20 0 3 0";
        assert_eq!(parse_stat(stat), Some(Duration::from_millis(3250)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_has_a_cpu_time_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(process_cpu(None).is_some());
        }
    }
}
