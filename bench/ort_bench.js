// ONNX Runtime's side of bench/ort_vs_yolocl.sh: one ONNX file timed in the Node binding
// (onnxruntime-node from $YOLOCL_ORT_DIR/node_modules, else Node's search path):
//
//   node ort_bench.js MODEL.onnx ITERS THREADS SPIN
//
// a session with all graph optimisations (ORT's default: constant folding, Conv + BatchNorm and
// Conv + activation fusion), THREADS intra-op threads and 1 inter-op thread, its idle threads
// spinning (ORT's default) when SPIN is 1, else sleeping (session.intra_op.allow_spinning 0), fed
// pseudo-random pixels of the file's input shape; 2 untimed runs, then ITERS timed ones.  Prints
// one line:
//
//   ort VERSION min_ms median_ms
'use strict';
const path = require('path');

const dir = process.env.YOLOCL_ORT_DIR;
const mod = dir ? path.join(dir, 'node_modules', 'onnxruntime-node') : 'onnxruntime-node';
const ort = require(mod);
const version = require(path.join(path.dirname(require.resolve(mod)), '..', 'package.json')).version;

async function main() {
    const [model, iters, threads, spin] = process.argv.slice(2);
    const session = await ort.InferenceSession.create(model, {
        intraOpNumThreads: Number(threads),
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
        extra: {session: {intra_op: {allow_spinning: spin === '1' ? '1' : '0'}}},
    });
    const dims = session.inputMetadata[0].shape;
    let n = 1;
    for (const d of dims) n *= d;
    const x = new Float32Array(n);
    let s = 12345;
    for (let i = 0; i < n; i++) {
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        x[i] = (s >>> 8) / 16777216;
    }
    const feeds = {images: new ort.Tensor('float32', x, dims)};
    const t = [];
    for (let i = -2; i < Number(iters); i++) {
        const t0 = process.hrtime.bigint();
        await session.run(feeds);
        if (i >= 0) t.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    t.sort((a, b) => a - b);
    const k = t.length;
    const median = k % 2 ? t[(k - 1) / 2] : (t[k / 2 - 1] + t[k / 2]) / 2;
    console.log(`ort ${version} ${t[0].toFixed(2)} ${median.toFixed(2)}`);
}

main().catch((e) => {
    console.error(`ort_bench.js: ${process.argv[2]}: ${e.message || e}`);
    process.exit(1);
});
