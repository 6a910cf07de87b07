//! One VM: the instrumented module instantiated under the test host, its callbacks entered
//! (and counted) by name.

use crate::cost::Cost;
use crate::host::{self, Host};
use crate::instrument::{self, BULK_BYTES, BULK_OPS, INSTRUCTIONS};
use std::collections::{BTreeMap, BTreeSet};
use wasmi::{CompilationMode, Config, Engine, Error, Global, Instance, Linker, Module, Store, Val};

/// A module loaded and started, as Envoy starts a VM.
pub struct Vm {
    store: Store<Host>,
    instance: Instance,
    exports: BTreeSet<String>,
    instructions: Global,
    bulk: Global,
    bulk_ops: Global,
    /// Per-function counters of instructions and of bulk-memory operations, by function
    /// index (only with [`Vm::load_with`]'s profile).
    functions: Vec<(u32, Global, Global)>,
}

impl Vm {
    /// Instruments `wasm`, links it to the test host (refusing unknown imports) and runs
    /// its WASI reactor initialisation if it exports one.
    pub fn load(wasm: &[u8]) -> Result<Vm, Error> {
        Vm::load_with(wasm, false)
    }

    /// The same, with a counter per function when `per_function` ([`Vm::functions`]).
    pub fn load_with(wasm: &[u8], per_function: bool) -> Result<Vm, Error> {
        let counted = instrument::instrument_with(wasm, per_function)
            .map_err(|e| Error::new(e.to_string()))?;
        // Functions are translated when first called: a path runs a small part of the
        // module, and the whole module is still validated before it runs.
        let mut config = Config::default();
        config.compilation_mode(CompilationMode::LazyTranslation);
        let engine = Engine::new(&config);
        let module = Module::new(&engine, &counted[..])?;
        let mut linker = Linker::new(&engine);
        host::link(&mut linker, &module)?;
        let mut store = Store::new(&engine, Host::default());
        let instance = linker.instantiate(&mut store, &module)?.start(&mut store)?;
        let exports = module.exports().map(|e| e.name().to_string()).collect();
        let global = |name| {
            instance
                .get_global(&store, name)
                .ok_or_else(|| Error::new(format!("the instrumented module lost {name}")))
        };
        let (instructions, bulk, bulk_ops) = (
            global(INSTRUCTIONS)?,
            global(BULK_BYTES)?,
            global(BULK_OPS)?,
        );
        let functions = module
            .exports()
            .filter_map(|e| {
                e.name()
                    .strip_prefix(instrument::FUNCTION_PREFIX)?
                    .parse()
                    .ok()
            })
            .filter_map(|index: u32| {
                let counter = |prefix| instance.get_global(&store, &format!("{prefix}{index}"));
                Some((
                    index,
                    counter(instrument::FUNCTION_PREFIX)?,
                    counter(instrument::FUNCTION_COPIES_PREFIX)?,
                ))
            })
            .collect();
        store.data_mut().memory = instance.get_memory(&store, "memory");
        store.data_mut().alloc = instance
            .get_typed_func::<i32, i32>(&store, crate::cost::ALLOCATE)
            .ok();
        let mut vm = Vm {
            store,
            instance,
            exports,
            instructions,
            bulk,
            bulk_ops,
            functions,
        };
        if vm.exports("_initialize") {
            vm.call("_initialize", 0, &[])?;
        }
        Ok(vm)
    }

    /// Whether the module exports `name` (Envoy enters only callbacks that exist).
    pub fn exports(&self, name: &str) -> bool {
        self.exports.contains(name)
    }

    /// Enters export `name` for context `context` with `args` (counted as a VM entry);
    /// its result, if any. The acting context is reset to `context`, as Envoy does for
    /// each callback.
    pub fn call(&mut self, name: &str, context: u32, args: &[Val]) -> Result<Option<Val>, Error> {
        let func = self
            .instance
            .get_func(&self.store, name)
            .ok_or_else(|| Error::new(format!("the module does not export {name}")))?;
        let results = func.ty(&self.store).results().len();
        let mut out = vec![Val::I32(0); results];
        let host = self.store.data_mut();
        host.cost.enter(name);
        host.current = context;
        host.effective = 0;
        func.call(&mut self.store, args, &mut out)
            .map_err(|e| self.with_output(name, e))?;
        Ok(out.first().cloned())
    }

    /// A trap's message with what the module logged and printed before it.
    fn with_output(&self, name: &str, error: Error) -> Error {
        let host = self.store.data();
        let logs: Vec<String> = host
            .logs
            .iter()
            .rev()
            .take(5)
            .map(|(_, m)| m.clone())
            .collect();
        Error::new(format!(
            "{name} failed: {error}; last logs: {logs:?}; output: {}",
            String::from_utf8_lossy(&host.output)
        ))
    }

    /// Everything counted since the VM was loaded.
    pub fn cost(&self) -> Cost {
        let read = |g: &Global| match g.get(&self.store) {
            Val::I64(n) => n as u64,
            _ => 0,
        };
        Cost {
            instructions: read(&self.instructions),
            bulk_bytes: read(&self.bulk),
            bulk_ops: read(&self.bulk_ops),
            ..self.store.data().cost.clone()
        }
    }

    /// Instructions executed and bulk-memory operations made so far in each function, by
    /// function index (empty unless loaded with counters per function).
    pub fn functions(&self) -> BTreeMap<u32, [u64; 2]> {
        let read = |g: &Global| match g.get(&self.store) {
            Val::I64(n) => n as u64,
            _ => 0,
        };
        self.functions
            .iter()
            .map(|(index, count, copies)| (*index, [read(count), read(copies)]))
            .collect()
    }

    /// The host's state.
    pub fn host(&mut self) -> &mut Host {
        self.store.data_mut()
    }

    /// The host's state, read only.
    pub fn host_ref(&self) -> &Host {
        self.store.data()
    }
}

#[cfg(test)]
mod tests;
