;; What a wasm memory.copy costs in V8 beside copying with loads and stores:
;; each function repeats one way of copying `len` bytes `n` times (run.mjs times them).
(module
  (memory (export "memory") 1)
  ;; The loop alone: the floor the others are read against.
  (func (export "empty") (param $n i32) (param $len i32)
    (loop $again
      (i32.store (i32.const 1024) (local.get $n))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $again (local.get $n))))
  ;; One memory.copy of `len` bytes a turn.
  (func (export "bulk") (param $n i32) (param $len i32)
    (loop $again
      (memory.copy (i32.const 1024) (i32.const 4096) (local.get $len))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $again (local.get $n))))
  ;; One memory.copy of a length known when compiled (as a move of a large value is).
  (func (export "bulk336") (param $n i32) (param $len i32)
    (loop $again
      (memory.copy (i32.const 1024) (i32.const 4096) (i32.const 336))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $again (local.get $n))))
  ;; The same bytes 8 at a time with i64 loads and stores.
  (func (export "words") (param $n i32) (param $len i32) (local $at i32)
    (loop $again
      (local.set $at (i32.const 0))
      (block $done
        (loop $word
          (br_if $done (i32.ge_u (local.get $at) (local.get $len)))
          (i64.store offset=1024 (local.get $at) (i64.load offset=4096 (local.get $at)))
          (local.set $at (i32.add (local.get $at) (i32.const 8)))
          (br $word)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $again (local.get $n))))
)
