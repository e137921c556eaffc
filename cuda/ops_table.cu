/* ops_table.cu - the CUDA op tables: float32, float64, and float16 and
 * bfloat16 (compute role 16-bit; stats and master FP32; scalars FP64). */
#include "ops_cuda.h"

template <typename T> static constexpr ds_ops cuda_ops_table()
{
    return ds_ops{
        .conv2d_work = cuda_conv2d_work<T>,
        .lookahead_work = cuda_lookahead_work<T>,
        .ctc_work = cuda_ctc_work<T>,
        .conv2d_fwd = cuda_conv2d_fwd<T>,
        .conv2d_bwd = cuda_conv2d_bwd<T>,
        .mask = cuda_mask<T>,
        .bn_moments = cuda_bn_moments<T>,
        .bn_fwd_train = cuda_bn_fwd_train<T>,
        .bn_fwd_eval = cuda_bn_fwd_eval<T>,
        .bn_bwd_moments = cuda_bn_bwd_moments<T>,
        .bn_bwd_train = cuda_bn_bwd_train<T>,
        .bn_bwd_eval = cuda_bn_bwd_eval<T>,
        .hardtanh_fwd = cuda_hardtanh_fwd<T>,
        .hardtanh_bwd = cuda_hardtanh_bwd<T>,
        .dropout_fwd = cuda_dropout_fwd<T>,
        .dropout_bwd = cuda_dropout_bwd<T>,
        .add = cuda_add<T>,
        .linear_fwd = cuda_linear_fwd<T>,
        .linear_bwd = cuda_linear_bwd<T>,
        .conv_to_seq = cuda_conv_to_seq<T>,
        .conv_to_seq_bwd = cuda_conv_to_seq_bwd<T>,
        .context_fwd = cuda_context_fwd<T>,
        .context_bwd = cuda_context_bwd<T>,
        .lookahead_fwd = cuda_lookahead_fwd<T>,
        .lookahead_bwd = cuda_lookahead_bwd<T>,
        .rnn_plan = cuda_rnn_plan<T>,
        .rnn_plan_destroy = cuda_rnn_plan_destroy<T>,
        .rnn_fwd = cuda_rnn_fwd<T>,
        .rnn_bwd = cuda_rnn_bwd<T>,
        .ctc_loss = cuda_ctc_loss<T>,
        .argmax = cuda_argmax<T>,
        .loss_total = cuda_loss_total<T>,
        .sumsq = cuda_sumsq<T>,
        .sgd_step = cuda_sgd_step<T>,
        .adamw_step = cuda_adamw_step<T>,
    };
}

extern "C" const ds_ops ds_cuda_ops_f32 = cuda_ops_table<float>();
extern "C" const ds_ops ds_cuda_ops_f64 = cuda_ops_table<double>();
extern "C" const ds_ops ds_cuda_ops_f16 = cuda_ops_table<__half>();
extern "C" const ds_ops ds_cuda_ops_bf16 = cuda_ops_table<__nv_bfloat16>();
