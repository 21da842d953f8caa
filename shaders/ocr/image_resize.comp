#version 450
// Packed RGB8 → packed RGB8: cv2.resize INTER_LINEAR (bit-exact on uint8, the arithmetic of
// image_preprocess.comp), with pad_top rows of black above and below (RapidOCR's letterbox). The output is
// total_rows rows of 3 · out_w bytes from byte 0; rows [pad_top, pad_top + out_h) hold the image.
// The source may be turned first by `turn` quarter turns counterclockwise (np.rot90's k: a page turned upright,
// agent/ocr/orientation.py): src_w × src_h are the turned image's sides, read where each pixel lies in the
// stored rows, so the turn costs no pass of its own.
//
// One invocation per output word: its 4 bytes start in channel c of some pixel and end in the next pixel
// (possibly the first of the next row), so each word needs exactly two output pixels. Bytes past the image's
// end are 0; words past it are not written, so a recording made for a big image, replayed for a smaller one,
// leaves the rest of the buffer alone. Per-request values come from the params buffer (vk/kernels/image.py,
// resize_params); the push constant holds only the recorded word count.
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Image { uint img[]; };     // packed bytes
layout(std430, set = 0, binding = 1) readonly buffer Params { uint prm[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { uint dst[]; };     // packed bytes

layout(push_constant) uniform Push {
    uint words;  // invocations the recording asked for (the grid rounds up to whole groups)
} pc;

#include "linear_resize.glsl"

uint src_w, src_h, stride, offset, out_w, out_h, pad_top, total_rows, turn;
float tie_x, tie_y;

// Byte address of pixel (row r, column c) of the turned source: where np.rot90(stored, turn) takes it from.
uint source_address(uint r, uint c) {
    uint y = r, x = c;
    if (turn == 1u) { y = c; x = src_h - 1u - r; }
    else if (turn == 2u) { y = src_h - 1u - r; x = src_w - 1u - c; }
    else if (turn == 3u) { y = src_w - 1u - c; x = r; }
    return offset + y * stride + 3u * x;
}

// Bytes addr .. addr + 2 of the image, byte addr lowest. Word reads are clamped to the buffer (robust against
// params that exceed it, as image_preprocess's image_byte).
uint source_pixel(uint addr) {
    uint last = uint(img.length()) - 1u;
    uint word = addr >> 2, shift = (addr & 3u) * 8u;
    uint v = img[min(word, last)];
    if (shift != 0u) v = (v >> shift) | (img[min(word + 1u, last)] << (32u - shift));
    return v & 0xFFFFFFu;
}

ivec3 channels(uint rgb) {
    return ivec3(uvec3(rgb, rgb >> 8, rgb >> 16) & 0xFFu);
}

// The two (turned) source rows of output row `row` and their vertical weights; false for the letterbox rows
// (and for an empty source).
bool source_rows(uint row, out uint top, out uint bottom, out int b0, out int b1) {
    top = bottom = 0u;
    b0 = b1 = 0;
    if (row < pad_top || row - pad_top >= out_h || src_w == 0u || src_h == 0u) return false;
    linear_coeffs(row - pad_top, src_h, out_h, tie_y, false, top, bottom, b0, b1);
    return true;
}

// Output pixel x of a row whose source rows are top and bottom, packed like the image (R lowest).
uint resized_pixel(uint x, uint top, uint bottom, int b0, int b1) {
    uint x0, x1;
    int a0, a1;
    linear_coeffs(x, src_w, out_w, tie_x, true, x0, x1, a0, a1);
    ivec3 h0 = channels(source_pixel(source_address(top, x0))) * a0
             + channels(source_pixel(source_address(top, x1))) * a1;
    ivec3 h1 = channels(source_pixel(source_address(bottom, x0))) * a0
             + channels(source_pixel(source_address(bottom, x1))) * a1;
    ivec3 v = clamp(((((h0 >> 4) * b0) >> 16) + (((h1 >> 4) * b1) >> 16) + 2) >> 2, 0, 255);
    return uint(v.x) | (uint(v.y) << 8) | (uint(v.z) << 16);
}

void main() {
    uint idx = flat_index();
    if (idx >= pc.words || idx >= uint(dst.length())) return;
    src_w = prm[0]; src_h = prm[1]; stride = prm[2]; offset = prm[3];
    out_w = prm[4]; out_h = prm[5]; tie_x = uintBitsToFloat(prm[6]); tie_y = uintBitsToFloat(prm[7]);
    pad_top = prm[8]; total_rows = prm[9]; turn = prm[10] & 3u;
    uint row_bytes = 3u * out_w;
    if (row_bytes == 0u) return;
    uint total = total_rows * row_bytes;  // < 2^32 (resize_params)
    if (idx >= total / 4u + uint((total & 3u) != 0u)) return;  // past the image: leave the word alone

    uint first = 4u * idx;
    uint row = first / row_bytes;
    uint col = first - row * row_bytes;
    uint x = col / 3u, c = col - 3u * x;
    uint top, bottom;
    int b0, b1;
    bool inside = source_rows(row, top, bottom, b0, b1);
    uint p0 = inside ? resized_pixel(x, top, bottom, b0, b1) : 0u;
    uint p1 = 0u;  // the next pixel; 0 past the image's end
    if (x + 1u < out_w) {
        if (inside) p1 = resized_pixel(x + 1u, top, bottom, b0, b1);
    } else if (row + 1u < total_rows && source_rows(row + 1u, top, bottom, b0, b1)) {
        p1 = resized_pixel(0u, top, bottom, b0, b1);
    }
    // bytes c .. 2 of p0, then the first c + 1 bytes of p1
    dst[idx] = (p0 >> (8u * c)) | (p1 << (24u - 8u * c));
}
