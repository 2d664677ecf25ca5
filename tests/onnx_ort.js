// Runs one ONNX file yolocl exported in ONNX Runtime (the npm package onnxruntime-node) and
// compares its output0 with yolocl's own (tests/test_onnx_ort.sh):
//
//   node onnx_ort.js MODEL.onnx REFDIR TOL_SCORE TOL_BOX TOL_BOX_REL
//
// feeds REFDIR/input.npy as `images` (converted to float16 for a file whose input is float16) and
// checks output0 against REFDIR/output0.npy (tests/onnx_ref): at most TOL_BOX + TOL_BOX_REL *
// |yolocl's value| pixels on the boxes and TOL_SCORE on the other values (scores, a segmentation
// model's mask coefficients); a classifier's logits, and a segmentation model's output1 against
// REFDIR/output1.npy, within TOL_SCORE times yolocl's largest value.  onnxruntime-node is loaded from
// $YOLOCL_ORT_DIR/node_modules (where `npm install --ignore-scripts onnxruntime-node` put it),
// else from Node's own search path.  Exits 1 on a difference or an error.
'use strict';
const fs = require('fs');
const path = require('path');

function loadOrt() {
    const dir = process.env.YOLOCL_ORT_DIR;
    return require(dir ? path.join(dir, 'node_modules', 'onnxruntime-node') : 'onnxruntime-node');
}

// A float32 .npy file (version 1.0, C order) as {shape, data}.
function readNpy(file) {
    const buf = fs.readFileSync(file);
    if (buf.readUInt32BE(0) !== 0x934e554d || buf[6] !== 1)
        throw new Error(file + ': not a version 1.0 .npy file');
    const hl = buf.readUInt16LE(8);
    const header = buf.toString('latin1', 10, 10 + hl);
    if (!header.includes("'descr': '<f4'") || !header.includes("'fortran_order': False"))
        throw new Error(file + ': not float32 in C order: ' + header);
    const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter((s) => s.trim())
        .map(Number);
    const start = 10 + hl;
    const data = new Float32Array(buf.buffer.slice(buf.byteOffset + start,
                                                   buf.byteOffset + buf.length));
    return {shape, data};
}

// IEEE half <-> float, round to nearest even.
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function toHalf(v) {
    f32[0] = v;
    const x = u32[0];
    const sign = (x >>> 16) & 0x8000;
    let exp = ((x >>> 23) & 0xff) - 127 + 15;
    let man = x & 0x7fffff;
    if (((x >>> 23) & 0xff) === 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
    if (exp >= 0x1f) return sign | 0x7c00;
    if (exp <= 0) {
        if (exp < -10) return sign;
        man |= 0x800000;
        const shift = 14 - exp;
        let h = man >>> shift;
        const rem = man & ((1 << shift) - 1), half = 1 << (shift - 1);
        if (rem > half || (rem === half && (h & 1))) h++;
        return sign | h;
    }
    let h = (exp << 10) | (man >>> 13);
    const rem = man & 0x1fff;
    if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
    return sign | h;
}
function fromHalf(h) {
    const sign = h & 0x8000 ? -1 : 1, exp = (h >>> 10) & 0x1f, man = h & 0x3ff;
    if (exp === 0) return sign * man * Math.pow(2, -24);
    if (exp === 0x1f) return man ? NaN : sign * Infinity;
    return sign * (1 + man / 1024) * Math.pow(2, exp - 15);
}

function maxAbs(a) {
    let m = 0;
    for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]));
    return m;
}

async function main() {
    const [model, ref, tolScore, tolBox, tolRel] = process.argv.slice(2).concat(['0']);
    const ort = loadOrt();
    const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 2});
    const meta = session.inputMetadata ? session.inputMetadata[0] : null;
    const x = readNpy(path.join(ref, 'input.npy'));
    const want = readNpy(path.join(ref, 'output0.npy'));
    const half = meta && meta.type === 'float16';
    let input;
    if (half) {
        const h = new Uint16Array(x.data.length);
        for (let i = 0; i < h.length; i++) h[i] = toHalf(x.data[i]);
        input = new ort.Tensor('float16', h, x.shape);
    } else {
        input = new ort.Tensor('float32', x.data, x.shape);
    }
    const results = await session.run({images: input});
    const out = results.output0;
    const got = out.type === 'float16' ? Float32Array.from(out.data, (v) => fromHalf(v)) : out.data;
    if (out.dims.join('x') !== want.shape.join('x'))
        throw new Error(`output0 has shape ${out.dims.join('x')}, yolocl's ${want.shape.join('x')}`);
    // a classifier's logits (B, nc): every value a score, the tolerance relative to the largest
    const no = want.shape.length === 3 ? want.shape[2] : 1;
    const nbox = want.shape.length === 3 ? 4 : 0;
    const scale = nbox ? 1 : maxAbs(want.data);
    let dbox = 0, dscore = 0, over = -Infinity;
    for (let i = 0; i < got.length; i++) {
        const d = Math.abs(got[i] - want.data[i]);
        if (!Number.isFinite(got[i])) throw new Error('output0 has NaN or Inf');
        if (i % no < nbox) {
            dbox = Math.max(dbox, d);
            over = Math.max(over, d - Number(tolRel) * Math.abs(want.data[i]));
        } else {
            dscore = Math.max(dscore, d);
        }
    }
    const version = require(path.join(path.dirname(require.resolve(
        process.env.YOLOCL_ORT_DIR ? path.join(process.env.YOLOCL_ORT_DIR, 'node_modules',
                                               'onnxruntime-node') : 'onnxruntime-node')),
        '..', 'package.json')).version;
    console.log(`ONNX Runtime ${version} (Node, ${out.type}): ${out.dims.join('x')}, max |diff| ` +
                `boxes ${dbox.toPrecision(3)} px (tolerance ${tolBox}` +
                `${Number(tolRel) ? ` + ${tolRel} |box|` : ''}), scores ` +
                `${dscore.toPrecision(3)} (tolerance ${tolScore})`);
    if (over > Number(tolBox) || !(dscore <= Number(tolScore) * scale)) {
        console.log(`FAIL: ${model}: output0 differs from yolocl's beyond the tolerance`);
        process.exit(1);
    }
    // a segmentation model's prototypes
    const p1 = path.join(ref, 'output1.npy');
    if (fs.existsSync(p1)) {
        const want1 = readNpy(p1), out1 = results.output1;
        if (!out1 || out1.dims.join('x') !== want1.shape.join('x'))
            throw new Error(`output1 has shape ${out1 ? out1.dims.join('x') : 'none'}, yolocl's ` +
                            `${want1.shape.join('x')}`);
        const got1 = out1.type === 'float16' ? Float32Array.from(out1.data, (v) => fromHalf(v))
                                             : out1.data;
        let d1 = 0;
        for (let i = 0; i < got1.length; i++) d1 = Math.max(d1, Math.abs(got1[i] - want1.data[i]));
        const top = maxAbs(want1.data);
        console.log(`  output1 ${out1.dims.join('x')}: max |diff| ${d1.toPrecision(3)} ` +
                    `(tolerance ${tolScore} x max |value| ${top.toPrecision(3)})`);
        if (!(d1 <= Number(tolScore) * top)) {
            console.log(`FAIL: ${model}: output1 differs from yolocl's beyond the tolerance`);
            process.exit(1);
        }
    }
}

main().catch((e) => {
    console.log(`FAIL: ${process.argv[2]}: ${e.message || e}`);
    process.exit(1);
});
