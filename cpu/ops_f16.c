/* ops_f16.c - the CPU ops in float16, emulated: the half_<op> wrappers of
 * ops_half.inc (widen to float32, run the float32 table of the instruction
 * set chosen, round back) and the float16 table. */
#define HALF_TO_F32 ds_f32_from_f16_n
#define HALF_FROM_F32 ds_f16_from_f32_n
#include "ops_half.inc"

const ds_ops ds_cpu_ops_f16 = {
    .conv2d_work = half_conv2d_work,
    .lookahead_work = half_lookahead_work,
    .ctc_work = half_ctc_work,
    .conv2d_fwd = half_conv2d_fwd,
    .conv2d_bwd = half_conv2d_bwd,
    .mask = half_mask,
    .bn_moments = half_bn_moments,
    .bn_fwd_train = half_bn_fwd_train,
    .bn_fwd_eval = half_bn_fwd_eval,
    .bn_bwd_moments = half_bn_bwd_moments,
    .bn_bwd_train = half_bn_bwd_train,
    .bn_bwd_eval = half_bn_bwd_eval,
    .hardtanh_fwd = half_hardtanh_fwd,
    .hardtanh_bwd = half_hardtanh_bwd,
    .linear_fwd = half_linear_fwd,
    .linear_bwd = half_linear_bwd,
    .conv_to_seq = half_conv_to_seq,
    .conv_to_seq_bwd = half_conv_to_seq_bwd,
    .lookahead_fwd = half_lookahead_fwd,
    .lookahead_bwd = half_lookahead_bwd,
    .rnn_plan = half_rnn_plan,
    .rnn_plan_destroy = half_rnn_plan_destroy,
    .rnn_fwd = half_rnn_fwd,
    .rnn_bwd = half_rnn_bwd,
    .ctc_loss = half_ctc_loss,
    .argmax = half_argmax,
    .loss_total = half_loss_total,
    .sumsq = half_sumsq,
    .sgd_step = half_sgd_step,
    .adamw_step = half_adamw_step,
};
