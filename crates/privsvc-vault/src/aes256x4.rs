//! AES-256 encryption of four blocks under four different keys at once, for the tag opener
//! (`gcm_siv.rs`), whose every message has a key of its own.
//!
//! This is the 64-bit fixsliced software AES of the `aes` crate (version 0.9.4,
//! `src/backends/fixslice/`: MIT OR Apache-2.0; the fixslicing of Adomnicai and Peyrin,
//! <https://eprint.iacr.org/2020/1123.pdf>, and the S-box circuit of Boyar, Peralta and Calik),
//! specialised to `u64` words, AES-256 and encryption, with one change: the key schedule loads
//! a different key into each of the four block lanes, where the crate loads the same key four
//! times. Every operation of the bitsliced key schedule and cipher keeps the lanes apart (the
//! rotations and shifts move bits by multiples of four, the lane index being the two lowest
//! bits of a bit's position), so lane `i` holds the round keys of key `i` and encrypts block `i`
//! under them. The tests compare it with the `aes` crate on random keys and blocks.
//!
//! Like the crate's, it uses no lookup table and no branch on secret data. Round keys are
//! wiped when dropped.

use zeroize::Zeroize;

/// The bitsliced state of four blocks: eight 64-bit bit planes.
type State = [u64; 8];

/// Round keys of four AES-256 keys, one per lane, in the fixsliced representation.
pub(crate) struct RoundKeys4([u64; 120]);

impl Drop for RoundKeys4 {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

/// Bits of one row of a bit plane (four rows of four columns of four lanes).
const ROW_BITS: u32 = 16;
const HALF_ROW: u32 = ROW_BITS / 2;
const QUARTER_ROW: u32 = ROW_BITS / 4;

/// The four key schedules of `keys`, key `i` in lane `i`.
pub(crate) fn key_schedule(keys: &[[u8; 32]; 4]) -> RoundKeys4 {
    let mut rkeys = [0u64; 120];
    let mut halves = [[0u8; 16]; 4];
    for (half, key) in halves.iter_mut().zip(keys) {
        half.copy_from_slice(&key[..16]);
    }
    bitslice(&mut rkeys[..8], &halves);
    for (half, key) in halves.iter_mut().zip(keys) {
        half.copy_from_slice(&key[16..]);
    }
    bitslice(&mut rkeys[8..16], &halves);
    halves.zeroize();

    let mut rk_off = 8;

    let mut rcon = 0;
    loop {
        memshift32(&mut rkeys, rk_off);
        rk_off += 8;

        sub_bytes(&mut rkeys[rk_off..(rk_off + 8)]);
        sub_bytes_nots(&mut rkeys[rk_off..(rk_off + 8)]);

        add_round_constant_bit(&mut rkeys[rk_off..(rk_off + 8)], rcon);
        xor_columns(&mut rkeys, rk_off, 16, ror_distance(1, 3));
        rcon += 1;

        if rcon == 7 {
            break;
        }

        memshift32(&mut rkeys, rk_off);
        rk_off += 8;

        sub_bytes(&mut rkeys[rk_off..(rk_off + 8)]);
        sub_bytes_nots(&mut rkeys[rk_off..(rk_off + 8)]);

        xor_columns(&mut rkeys, rk_off, 16, ror_distance(0, 3));
    }

    // Adjust to match fixslicing format
    for i in (8..104).step_by(32) {
        inv_shift_rows_1(&mut rkeys[i..(i + 8)]);
        inv_shift_rows_2(&mut rkeys[(i + 8)..(i + 16)]);
        inv_shift_rows_3(&mut rkeys[(i + 16)..(i + 24)]);
    }
    inv_shift_rows_1(&mut rkeys[104..112]);

    // Account for NOTs removed from sub_bytes
    for i in 1..15 {
        sub_bytes_nots(&mut rkeys[(i * 8)..(i * 8 + 8)]);
    }

    let keys = RoundKeys4(rkeys);
    rkeys.zeroize();
    keys
}

/// Encrypts block `i` under key `i` of `rkeys`, for the four blocks at once.
pub(crate) fn encrypt(rkeys: &RoundKeys4, blocks: &[[u8; 16]; 4]) -> [[u8; 16]; 4] {
    let rkeys = &rkeys.0;
    let mut state = State::default();

    bitslice(&mut state, blocks);

    add_round_key(&mut state, &rkeys[..8]);

    let mut rk_off = 8;
    loop {
        sub_bytes(&mut state);
        mix_columns_1(&mut state);
        add_round_key(&mut state, &rkeys[rk_off..(rk_off + 8)]);
        rk_off += 8;

        if rk_off == 112 {
            break;
        }

        sub_bytes(&mut state);
        mix_columns_2(&mut state);
        add_round_key(&mut state, &rkeys[rk_off..(rk_off + 8)]);
        rk_off += 8;

        sub_bytes(&mut state);
        mix_columns_3(&mut state);
        add_round_key(&mut state, &rkeys[rk_off..(rk_off + 8)]);
        rk_off += 8;

        sub_bytes(&mut state);
        mix_columns_0(&mut state);
        add_round_key(&mut state, &rkeys[rk_off..(rk_off + 8)]);
        rk_off += 8;
    }

    shift_rows_2(&mut state);

    sub_bytes(&mut state);
    add_round_key(&mut state, &rkeys[112..]);

    let out = inv_bitslice(&state);
    state.zeroize();
    out
}

/// Distance in bits to rotate a state row by `(rows, cols)` positions.
const fn ror_distance(rows: u32, cols: u32) -> u32 {
    rows * ROW_BITS + cols * QUARTER_ROW
}

/// Spreads the 16 bits of `b` to the low bit of each nibble, each repeated over the nibble.
const fn quad_bits_16_to_64(b: u16) -> u64 {
    let x = b as u64;
    // Spread the 16 bits of x to positions 0,4,8,12,16,20,24,28,32,36,40,44,48,52,56,60.
    let x = (x | (x << 24)) & 0x000000FF000000FF;
    let x = (x | (x << 12)) & 0x000F000F000F000F;
    let x = (x | (x << 6)) & 0x0303030303030303;
    let x = (x | (x << 3)) & 0x1111111111111111;
    // Duplicate each spread bit to its adjacent odd position.
    x | (x << 1) | (x << 2) | (x << 3)
}

/// The same nibble across all 4 rows of the word.
const fn uniform_row(b: u8) -> u64 {
    quad_bits_16_to_64(b as u16).wrapping_mul(0x0001_0001_0001_0001)
}

/// One nibble at each of the 4 row positions of the word (row 0 = LSB).
const fn pack_rows(r0: u8, r1: u8, r2: u8, r3: u8) -> u64 {
    quad_bits_16_to_64(r0 as u16)
        | (quad_bits_16_to_64(r1 as u16) << 16)
        | (quad_bits_16_to_64(r2 as u16) << 32)
        | (quad_bits_16_to_64(r3 as u16) << 48)
}

/// Byte `b` in every byte of the word.
const fn byte_repeat(b: u8) -> u64 {
    (b as u64).wrapping_mul(0x0101010101010101)
}

/// Bitslice four 128-bit input blocks into a 512-bit internal state.
fn bitslice(output: &mut [u64], input: &[[u8; 16]; 4]) {
    debug_assert_eq!(output.len(), 8);

    // Bitslicing is a bit index manipulation. 512 bits of data means each bit is positioned at
    // a 9-bit index. AES data is 4 blocks, each one a 4x4 column-major matrix of bytes, so the
    // index is initially ([b]lock, [c]olumn, [r]ow, [p]osition):
    //     b1 b0 c1 c0 r1 r0 p2 p1 p0
    //
    // The desired bitsliced data groups first by bit position, then row, column, block:
    //     p2 p1 p0 r1 r0 c1 c0 b1 b0

    #[rustfmt::skip]
    fn read_reordered(input: &[u8]) -> u64 {
        (u64::from(input[0x0])        ) |
        (u64::from(input[0x1]) << 0x10) |
        (u64::from(input[0x2]) << 0x20) |
        (u64::from(input[0x3]) << 0x30) |
        (u64::from(input[0x8]) << 0x08) |
        (u64::from(input[0x9]) << 0x18) |
        (u64::from(input[0xa]) << 0x28) |
        (u64::from(input[0xb]) << 0x38)
    }

    // Reorder each block's bytes on input
    //     __ __ c1 c0 r1 r0 __ __ __ => __ __ c0 r1 r0 c1 __ __ __
    // Reorder by relabeling (note the order of input)
    //     b1 b0 c0 __ __ __ __ __ __ => c0 b1 b0 __ __ __ __ __ __
    let mut t = [
        read_reordered(&input[0][0x00..0x0c]),
        read_reordered(&input[1][0x00..0x0c]),
        read_reordered(&input[2][0x00..0x0c]),
        read_reordered(&input[3][0x00..0x0c]),
        read_reordered(&input[0][0x04..0x10]),
        read_reordered(&input[1][0x04..0x10]),
        read_reordered(&input[2][0x04..0x10]),
        read_reordered(&input[3][0x04..0x10]),
    ];

    bitslice_swaps(&mut t);

    // Final bitsliced bit index, as desired:
    //     p2 p1 p0 r1 r0 c1 c0 b1 b0
    output[..8].copy_from_slice(&t);
    t.zeroize();
}

/// Un-bitslice a 512-bit internal state into four 128-bit blocks.
fn inv_bitslice(input: &[u64]) -> [[u8; 16]; 4] {
    debug_assert_eq!(input.len(), 8);

    // Unbitslicing is a bit index manipulation. 512 bits of data means each bit is positioned
    // at a 9-bit index. AES data is 4 blocks, each one a 4x4 column-major matrix of bytes, so
    // the desired index for the output is ([b]lock, [c]olumn, [r]ow, [p]osition):
    //     b1 b0 c1 c0 r1 r0 p2 p1 p0
    //
    // The initially bitsliced data groups first by bit position, then row, column, block:
    //     p2 p1 p0 r1 r0 c1 c0 b1 b0

    let mut t = [
        input[0], input[1], input[2], input[3], input[4], input[5], input[6], input[7],
    ];

    bitslice_swaps(&mut t);

    #[rustfmt::skip]
    fn write_reordered(columns: u64, output: &mut [u8]) {
        output[0x0] = (columns        ) as u8;
        output[0x1] = (columns >> 0x10) as u8;
        output[0x2] = (columns >> 0x20) as u8;
        output[0x3] = (columns >> 0x30) as u8;
        output[0x8] = (columns >> 0x08) as u8;
        output[0x9] = (columns >> 0x18) as u8;
        output[0xa] = (columns >> 0x28) as u8;
        output[0xb] = (columns >> 0x38) as u8;
    }

    let mut output = [[0u8; 16]; 4];
    // Reorder by relabeling (note the order of output)
    //     c0 b1 b0 __ __ __ __ __ __ => b1 b0 c0 __ __ __ __ __ __
    // Reorder each block's bytes on output
    //     __ __ c0 r1 r0 c1 __ __ __ => __ __ c1 c0 r1 r0 __ __ __
    write_reordered(t[0], &mut output[0][0x00..0x0c]);
    write_reordered(t[4], &mut output[0][0x04..0x10]);
    write_reordered(t[1], &mut output[1][0x00..0x0c]);
    write_reordered(t[5], &mut output[1][0x04..0x10]);
    write_reordered(t[2], &mut output[2][0x00..0x0c]);
    write_reordered(t[6], &mut output[2][0x04..0x10]);
    write_reordered(t[3], &mut output[3][0x00..0x0c]);
    write_reordered(t[7], &mut output[3][0x04..0x10]);
    t.zeroize();

    // Final AES bit index, as desired:
    //     b1 b0 c1 c0 r1 r0 p2 p1 p0
    output
}

/// The delta-swap pipeline shared by `bitslice` and `inv_bitslice`: the same three passes
/// invert themselves.
#[inline(always)]
fn bitslice_swaps(t: &mut [u64; 8]) {
    let [t0, t1, t2, t3, t4, t5, t6, t7] = t;

    // Bit Index Swap 5 <-> 0
    let m0 = byte_repeat(0x55);
    delta_swap_2(t1, t0, 1, m0);
    delta_swap_2(t3, t2, 1, m0);
    delta_swap_2(t5, t4, 1, m0);
    delta_swap_2(t7, t6, 1, m0);

    // Bit Index Swap 6 <-> 1
    let m1 = byte_repeat(0x33);
    delta_swap_2(t2, t0, 2, m1);
    delta_swap_2(t3, t1, 2, m1);
    delta_swap_2(t6, t4, 2, m1);
    delta_swap_2(t7, t5, 2, m1);

    // Bit Index Swap 7 <-> 2
    let m2 = byte_repeat(0x0f);
    delta_swap_2(t4, t0, 4, m2);
    delta_swap_2(t5, t1, 4, m2);
    delta_swap_2(t6, t2, 4, m2);
    delta_swap_2(t7, t3, 4, m2);
}

#[inline]
fn delta_swap_1(a: &mut u64, shift: u32, mask: u64) {
    let t = (*a ^ ((*a) >> shift)) & mask;
    *a ^= t ^ (t << shift);
}

#[inline]
fn delta_swap_2(a: &mut u64, b: &mut u64, shift: u32, mask: u64) {
    let t = (*a ^ ((*b) >> shift)) & mask;
    *a ^= t;
    *b ^= t << shift;
}

/// Applies ShiftRows once on an AES state (or key).
#[inline]
fn shift_rows_1(state: &mut [u64]) {
    debug_assert_eq!(state.len(), 8);
    for x in state.iter_mut() {
        delta_swap_1(x, HALF_ROW, pack_rows(0x0, 0x1, 0x3, 0x2));
        delta_swap_1(x, QUARTER_ROW, pack_rows(0x0, 0x5, 0x0, 0x5));
    }
}

/// Applies ShiftRows twice on an AES state (or key).
#[inline]
fn shift_rows_2(state: &mut [u64]) {
    debug_assert_eq!(state.len(), 8);
    for x in state.iter_mut() {
        delta_swap_1(x, HALF_ROW, pack_rows(0x0, 0x3, 0x0, 0x3));
    }
}

/// Applies ShiftRows three times on an AES state (or key).
#[inline]
fn shift_rows_3(state: &mut [u64]) {
    debug_assert_eq!(state.len(), 8);
    for x in state.iter_mut() {
        delta_swap_1(x, HALF_ROW, pack_rows(0x0, 0x2, 0x3, 0x1));
        delta_swap_1(x, QUARTER_ROW, pack_rows(0x0, 0x5, 0x0, 0x5));
    }
}

#[inline(always)]
fn inv_shift_rows_1(state: &mut [u64]) {
    shift_rows_3(state);
}

#[inline(always)]
fn inv_shift_rows_2(state: &mut [u64]) {
    shift_rows_2(state);
}

#[inline(always)]
fn inv_shift_rows_3(state: &mut [u64]) {
    shift_rows_1(state);
}

/// XOR the columns after the S-box during the key schedule round function (`idx_xor`: the
/// index of the previous round key in the XOR, 16 for AES-256; `idx_ror`: the rotation).
fn xor_columns(rkeys: &mut [u64], offset: usize, idx_xor: usize, idx_ror: u32) {
    for i in 0..8 {
        let off_i = offset + i;
        let rk = rkeys[off_i - idx_xor] ^ (uniform_row(0x1) & rkeys[off_i].rotate_right(idx_ror));
        rkeys[off_i] = rk
            ^ (uniform_row(0xe) & (rk << QUARTER_ROW))
            ^ (uniform_row(0xc) & (rk << HALF_ROW))
            ^ (uniform_row(0x8) & (rk << (3 * QUARTER_ROW)));
    }
}

/// Copy 32 bytes within the provided slice to an 8-word offset.
fn memshift32(buffer: &mut [u64], src_offset: usize) {
    debug_assert_eq!(src_offset % 8, 0);

    let dst_offset = src_offset + 8;
    debug_assert!(dst_offset + 8 <= buffer.len());

    for i in (0..8).rev() {
        buffer[dst_offset + i] = buffer[src_offset + i];
    }
}

/// XOR the round key into the internal state. The round keys are expected to be pre-computed
/// and packed in the fixsliced representation.
#[inline]
fn add_round_key(state: &mut State, rkey: &[u64]) {
    debug_assert_eq!(rkey.len(), 8);
    for (a, b) in state.iter_mut().zip(rkey) {
        *a ^= *b;
    }
}

#[inline(always)]
fn add_round_constant_bit(state: &mut [u64], bit: usize) {
    state[bit] ^= pack_rows(0x0, 0x8, 0x0, 0x0);
}

/// NOT operations that are omitted in S-box.
#[inline]
fn sub_bytes_nots(state: &mut [u64]) {
    debug_assert_eq!(state.len(), 8);
    state[0] = !state[0];
    state[1] = !state[1];
    state[5] = !state[5];
    state[6] = !state[6];
}

/// Bitsliced implementation of the AES Sbox based on Boyar, Peralta and Calik.
///
/// See: <http://www.cs.yale.edu/homes/peralta/CircuitStuff/SLP_AES_113.txt>
///
/// Note that the 4 bitwise NOT are moved to the key schedule.
fn sub_bytes(state: &mut [u64]) {
    debug_assert_eq!(state.len(), 8);

    // Scheduled using https://github.com/Ko-/aes-armcortexm/tree/public/scheduler
    // Inline "stack" comments reflect suggested stores and loads (ARM Cortex-M3 and M4)

    let u7 = state[0];
    let u6 = state[1];
    let u5 = state[2];
    let u4 = state[3];
    let u3 = state[4];
    let u2 = state[5];
    let u1 = state[6];
    let u0 = state[7];

    let y14 = u3 ^ u5;
    let y13 = u0 ^ u6;
    let y12 = y13 ^ y14;
    let t1 = u4 ^ y12;
    let y15 = t1 ^ u5;
    let t2 = y12 & y15;
    let y6 = y15 ^ u7;
    let y20 = t1 ^ u1;
    // y12 -> stack
    let y9 = u0 ^ u3;
    // y20 -> stack
    let y11 = y20 ^ y9;
    // y9 -> stack
    let t12 = y9 & y11;
    // y6 -> stack
    let y7 = u7 ^ y11;
    let y8 = u0 ^ u5;
    let t0 = u1 ^ u2;
    let y10 = y15 ^ t0;
    // y15 -> stack
    let y17 = y10 ^ y11;
    // y14 -> stack
    let t13 = y14 & y17;
    let t14 = t13 ^ t12;
    // y17 -> stack
    let y19 = y10 ^ y8;
    // y10 -> stack
    let t15 = y8 & y10;
    let t16 = t15 ^ t12;
    let y16 = t0 ^ y11;
    // y11 -> stack
    let y21 = y13 ^ y16;
    // y13 -> stack
    let t7 = y13 & y16;
    // y16 -> stack
    let y18 = u0 ^ y16;
    let y1 = t0 ^ u7;
    let y4 = y1 ^ u3;
    // u7 -> stack
    let t5 = y4 & u7;
    let t6 = t5 ^ t2;
    let t18 = t6 ^ t16;
    let t22 = t18 ^ y19;
    let y2 = y1 ^ u0;
    let t10 = y2 & y7;
    let t11 = t10 ^ t7;
    let t20 = t11 ^ t16;
    let t24 = t20 ^ y18;
    let y5 = y1 ^ u6;
    let t8 = y5 & y1;
    let t9 = t8 ^ t7;
    let t19 = t9 ^ t14;
    let t23 = t19 ^ y21;
    let y3 = y5 ^ y8;
    // y6 <- stack
    let t3 = y3 & y6;
    let t4 = t3 ^ t2;
    // y20 <- stack
    let t17 = t4 ^ y20;
    let t21 = t17 ^ t14;
    let t26 = t21 & t23;
    let t27 = t24 ^ t26;
    let t31 = t22 ^ t26;
    let t25 = t21 ^ t22;
    // y4 -> stack
    let t28 = t25 & t27;
    let t29 = t28 ^ t22;
    let z14 = t29 & y2;
    let z5 = t29 & y7;
    let t30 = t23 ^ t24;
    let t32 = t31 & t30;
    let t33 = t32 ^ t24;
    let t35 = t27 ^ t33;
    let t36 = t24 & t35;
    let t38 = t27 ^ t36;
    let t39 = t29 & t38;
    let t40 = t25 ^ t39;
    let t43 = t29 ^ t40;
    // y16 <- stack
    let z3 = t43 & y16;
    let tc12 = z3 ^ z5;
    // tc12 -> stack
    // y13 <- stack
    let z12 = t43 & y13;
    let z13 = t40 & y5;
    let z4 = t40 & y1;
    let tc6 = z3 ^ z4;
    let t34 = t23 ^ t33;
    let t37 = t36 ^ t34;
    let t41 = t40 ^ t37;
    // y10 <- stack
    let z8 = t41 & y10;
    let z17 = t41 & y8;
    let t44 = t33 ^ t37;
    // y15 <- stack
    let z0 = t44 & y15;
    // z17 -> stack
    // y12 <- stack
    let z9 = t44 & y12;
    let z10 = t37 & y3;
    let z1 = t37 & y6;
    let tc5 = z1 ^ z0;
    let tc11 = tc6 ^ tc5;
    // y4 <- stack
    let z11 = t33 & y4;
    let t42 = t29 ^ t33;
    let t45 = t42 ^ t41;
    // y17 <- stack
    let z7 = t45 & y17;
    let tc8 = z7 ^ tc6;
    // y14 <- stack
    let z16 = t45 & y14;
    // y11 <- stack
    let z6 = t42 & y11;
    let tc16 = z6 ^ tc8;
    // z14 -> stack
    // y9 <- stack
    let z15 = t42 & y9;
    let tc20 = z15 ^ tc16;
    let tc1 = z15 ^ z16;
    let tc2 = z10 ^ tc1;
    let tc21 = tc2 ^ z11;
    let tc3 = z9 ^ tc2;
    let s0 = tc3 ^ tc16;
    let s3 = tc3 ^ tc11;
    let s1 = s3 ^ tc16;
    let tc13 = z13 ^ tc1;
    // u7 <- stack
    let z2 = t33 & u7;
    let tc4 = z0 ^ z2;
    let tc7 = z12 ^ tc4;
    let tc9 = z8 ^ tc7;
    let tc10 = tc8 ^ tc9;
    // z14 <- stack
    let tc17 = z14 ^ tc10;
    let s5 = tc21 ^ tc17;
    let tc26 = tc17 ^ tc20;
    // z17 <- stack
    let s2 = tc26 ^ z17;
    // tc12 <- stack
    let tc14 = tc4 ^ tc12;
    let tc18 = tc13 ^ tc14;
    let s6 = tc10 ^ tc18;
    let s7 = z12 ^ tc18;
    let s4 = tc14 ^ s3;

    state[0] = s7;
    state[1] = s6;
    state[2] = s5;
    state[3] = s4;
    state[4] = s3;
    state[5] = s2;
    state[6] = s1;
    state[7] = s0;
}

/// Computation of the MixColumns transformation in the fixsliced representation,
/// with different rotations used according to the round number mod 4.
///
/// Based on Käsper-Schwabe, similar to https://github.com/Ko-/aes-armcortexm.
macro_rules! define_mix_columns {
    (
        $name:ident,
                $first_rotate:path,
        $second_rotate:path
    ) => {
        #[rustfmt::skip]
        fn $name(state: &mut State) {
            let (a0, a1, a2, a3, a4, a5, a6, a7) = (
                state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7]
            );
            let (b0, b1, b2, b3, b4, b5, b6, b7) = (
                $first_rotate(a0),
                $first_rotate(a1),
                $first_rotate(a2),
                $first_rotate(a3),
                $first_rotate(a4),
                $first_rotate(a5),
                $first_rotate(a6),
                $first_rotate(a7),
            );
            let (c0, c1, c2, c3, c4, c5, c6, c7) = (
                a0 ^ b0,
                a1 ^ b1,
                a2 ^ b2,
                a3 ^ b3,
                a4 ^ b4,
                a5 ^ b5,
                a6 ^ b6,
                a7 ^ b7,
            );
            state[0] = b0      ^ c7 ^ $second_rotate(c0);
            state[1] = b1 ^ c0 ^ c7 ^ $second_rotate(c1);
            state[2] = b2 ^ c1      ^ $second_rotate(c2);
            state[3] = b3 ^ c2 ^ c7 ^ $second_rotate(c3);
            state[4] = b4 ^ c3 ^ c7 ^ $second_rotate(c4);
            state[5] = b5 ^ c4      ^ $second_rotate(c5);
            state[6] = b6 ^ c5      ^ $second_rotate(c6);
            state[7] = b7 ^ c6      ^ $second_rotate(c7);
        }
    };
}

define_mix_columns!(mix_columns_0, rotate_rows_1, rotate_rows_2);
define_mix_columns!(
    mix_columns_1,
    rotate_rows_and_columns_1_1,
    rotate_rows_and_columns_2_2
);
define_mix_columns!(mix_columns_2, rotate_rows_and_columns_1_2, rotate_rows_2);
define_mix_columns!(
    mix_columns_3,
    rotate_rows_and_columns_1_3,
    rotate_rows_and_columns_2_2
);

#[inline(always)]
fn rotate_rows_1(x: u64) -> u64 {
    x.rotate_right(ror_distance(1, 0))
}

#[inline(always)]
fn rotate_rows_2(x: u64) -> u64 {
    x.rotate_right(ror_distance(2, 0))
}

#[inline(always)]
fn rotate_rows_and_columns_1_1(x: u64) -> u64 {
    let a = x.rotate_right(ror_distance(1, 1)) & uniform_row(0x7);
    let b = x.rotate_right(ror_distance(0, 1)) & uniform_row(0x8);
    a | b
}

#[inline(always)]
fn rotate_rows_and_columns_1_2(x: u64) -> u64 {
    let a = x.rotate_right(ror_distance(1, 2)) & uniform_row(0x3);
    let b = x.rotate_right(ror_distance(0, 2)) & uniform_row(0xc);
    a | b
}

#[inline(always)]
fn rotate_rows_and_columns_1_3(x: u64) -> u64 {
    let a = x.rotate_right(ror_distance(1, 3)) & uniform_row(0x1);
    let b = x.rotate_right(ror_distance(0, 3)) & uniform_row(0xe);
    a | b
}

#[inline(always)]
fn rotate_rows_and_columns_2_2(x: u64) -> u64 {
    let a = x.rotate_right(ror_distance(2, 2)) & uniform_row(0x3);
    let b = x.rotate_right(ror_distance(1, 2)) & uniform_row(0xc);
    a | b
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes09::cipher::{Array, BlockCipherEncrypt, KeyInit};
    use aes09::Aes256;
    use proptest::prelude::*;

    /// What the `aes` crate gives for each key and block.
    fn one_by_one(keys: &[[u8; 32]; 4], blocks: &[[u8; 16]; 4]) -> [[u8; 16]; 4] {
        let mut out = *blocks;
        for (block, key) in out.iter_mut().zip(keys) {
            let mut b = Array::from(*block);
            Aes256::new(&Array::from(*key)).encrypt_block(&mut b);
            *block = b.into();
        }
        out
    }

    #[test]
    fn fips_197_appendix_c3_in_every_lane_beside_other_keys() {
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let plain: [u8; 16] = std::array::from_fn(|i| (i as u8) * 0x11);
        let expected = [
            0x8e, 0xa2, 0xb7, 0xca, 0x51, 0x67, 0x45, 0xbf, 0xea, 0xfc, 0x49, 0x90, 0x4b, 0x49,
            0x60, 0x89,
        ];
        for lane in 0..4 {
            let mut keys = [[0xa5u8; 32]; 4];
            let mut blocks = [[0x5au8; 16]; 4];
            keys[lane] = key;
            blocks[lane] = plain;
            let out = encrypt(&key_schedule(&keys), &blocks);
            assert_eq!(out[lane], expected, "lane {lane}");
            assert_eq!(out, one_by_one(&keys, &blocks), "lane {lane}");
        }
    }

    proptest! {
        #[test]
        fn four_keys_at_once_encrypt_as_the_aes_crate_does_one_by_one(
            keys in proptest::array::uniform4(proptest::array::uniform32(any::<u8>())),
            blocks in proptest::array::uniform4(proptest::array::uniform16(any::<u8>())),
        ) {
            prop_assert_eq!(encrypt(&key_schedule(&keys), &blocks), one_by_one(&keys, &blocks));
        }
    }
}
