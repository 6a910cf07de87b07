//! What one request (or one tick) cost: the counts the harness reports and budgets.

use std::collections::BTreeMap;

/// The entry Envoy makes into the VM to get memory for each value it hands back.
pub const ALLOCATE: &str = "proxy_on_memory_allocate";

/// Everything counted between two points of a run. Each figure is exact: the same module
/// and the same path give the same counts on any machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cost {
    /// Wasm instructions executed (see [`crate::instrument`] for what counts as one).
    pub instructions: u64,
    /// Bytes moved by `memory.copy` / `memory.fill` / `memory.init`.
    pub bulk_bytes: u64,
    /// `memory.copy` / `memory.fill` / `memory.init` executed: each a call into C in V8.
    pub bulk_ops: u64,
    /// Entries into the VM, by export (callbacks, and the allocation of each value the
    /// host hands back, [`ALLOCATE`]).
    pub entries: BTreeMap<String, u64>,
    /// Host calls, by import.
    pub host_calls: BTreeMap<String, u64>,
    /// Bytes the host copied into the module's memory (values it handed back).
    pub bytes_in: u64,
    /// Bytes the host read out of the module's memory (names, keys, values, bodies).
    pub bytes_out: u64,
}

impl Cost {
    /// All VM entries.
    pub fn vm_entries(&self) -> u64 {
        self.entries.values().sum()
    }

    /// All host calls.
    pub fn calls(&self) -> u64 {
        self.host_calls.values().sum()
    }

    /// Counts one entry into `export`.
    pub fn enter(&mut self, export: &str) {
        *self.entries.entry(export.to_string()).or_default() += 1;
    }

    /// Counts one call of `import`.
    pub fn call(&mut self, import: &str) {
        *self.host_calls.entry(import.to_string()).or_default() += 1;
    }

    /// What was counted since `earlier` (a snapshot of the same run).
    pub fn since(&self, earlier: &Cost) -> Cost {
        let minus = |now: &BTreeMap<String, u64>, then: &BTreeMap<String, u64>| {
            now.iter()
                .map(|(k, v)| (k.clone(), v - then.get(k).copied().unwrap_or(0)))
                .filter(|(_, v)| *v > 0)
                .collect()
        };
        Cost {
            instructions: self.instructions - earlier.instructions,
            bulk_bytes: self.bulk_bytes - earlier.bulk_bytes,
            bulk_ops: self.bulk_ops - earlier.bulk_ops,
            entries: minus(&self.entries, &earlier.entries),
            host_calls: minus(&self.host_calls, &earlier.host_calls),
            bytes_in: self.bytes_in - earlier.bytes_in,
            bytes_out: self.bytes_out - earlier.bytes_out,
        }
    }

    /// Every figure as (name, value), in the budget file's order and names: the totals,
    /// then each entry and host call by name.
    pub fn figures(&self) -> Vec<(String, u64)> {
        let mut out = vec![
            ("instructions".to_string(), self.instructions),
            ("bulk_bytes".to_string(), self.bulk_bytes),
            ("bulk_ops".to_string(), self.bulk_ops),
            ("vm_entries".to_string(), self.vm_entries()),
            ("host_calls".to_string(), self.calls()),
            ("bytes_in".to_string(), self.bytes_in),
            ("bytes_out".to_string(), self.bytes_out),
        ];
        out.extend(self.entries.iter().map(|(k, v)| (format!("entry.{k}"), *v)));
        out.extend(
            self.host_calls
                .iter()
                .map(|(k, v)| (format!("call.{k}"), *v)),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_subtracts_and_drops_what_did_not_change() {
        let mut before = Cost::default();
        before.call("proxy_log");
        before.instructions = 10;
        let mut after = before.clone();
        after.call("proxy_get_shared_data");
        after.enter(ALLOCATE);
        after.instructions = 25;
        after.bytes_in = 7;
        let d = after.since(&before);
        assert_eq!(d.instructions, 15);
        assert_eq!(
            d.host_calls.keys().collect::<Vec<_>>(),
            ["proxy_get_shared_data"]
        );
        assert_eq!((d.vm_entries(), d.calls(), d.bytes_in), (1, 1, 7));
    }
}
