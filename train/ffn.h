/* The C2T classifier's two-layer FFN for training: forward, BCE-with-logits
 * loss, backward and torch.optim.Adam, in float32 like the PyTorch module.
 *
 * The network has nf inputs (1..FFN_MAX_FEAT).  Parameters are one flat
 * float vector in PyTorch's state_dict order:
 *   fc1.weight [h][nf] | fc1.bias [h] | fc2.weight [1][h] | fc2.bias [1]
 * ((nf + 2) h + 1 values; 241 for nf = 3, h = 48).  Feature k of sample i
 * is x[k][i] (the model input after the classifier's transforms, see
 * infer/speculative/classifier.h). */
#ifndef C2T_TRAIN_FFN_H
#define C2T_TRAIN_FFN_H
#include "kernels/base/rng.h"
#include <stdint.h>

#define FFN_MAX_HIDDEN 4096
#define FFN_MAX_FEAT 6
/* Samples per work unit of the batched gradient; fixed so the summation
 * order (and the result) does not depend on the number of threads. */
#define FFN_CHUNK 256

static inline int ffn_nparams(int nf, int h) { return (nf + 2) * h + 1; }
static inline int ffn_off_b1(int nf, int h) { return nf * h; }
static inline int ffn_off_w2(int nf, int h) { return (nf + 1) * h; }
static inline int ffn_off_b2(int nf, int h) { return (nf + 2) * h; }

/* PyTorch nn.Linear default initialisation (kaiming_uniform_(a=sqrt(5)) for
 * the weight, i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), same bound for the
 * bias), from the RNG, in state_dict order. */
void ffn_init(float *theta, int nf, int h, Rng *rng);

typedef struct FfnWork FfnWork;
FfnWork *ffn_work_new(int nf, int h, int max_batch);
void ffn_work_free(FfnWork *w);
/* Threads for ffn_loss_grad (default 1); the result does not depend on it. */
void ffn_work_set_threads(FfnWork *w, int threads);

/* Mean BCE-with-logits over the n samples (returned) and its gradient with
 * respect to theta (written to grad, flat layout).  Uses OpenMP over
 * FFN_CHUNK-sample chunks (ffn_work_set_threads); the chunk partial sums
 * are added in a fixed order, so the result is the same for any thread
 * count. */
double ffn_loss_grad(FfnWork *w, const float *theta, const float *const *x, const float *y, int n,
                     float *grad);

/* Double-precision reference of the same function (gradient check):
 * x is [n][nf] row-major. */
double ffn_loss_grad_ref(const double *theta, int nf, int h, const double *x, const double *y, int n,
                         double *grad);

/* torch.optim.Adam (amsgrad off, weight_decay 0, maximize off), the
 * single-tensor CPU path: m.lerp_(g, 1-b1); v.mul_(b2).addcmul_(g, g, 1-b2);
 * p.addcdiv_(m, sqrt(v)/sqrt(1-b2^t) + eps, -lr/(1-b1^t)); float32 state,
 * bias corrections in double like PyTorch's Python scalars. */
typedef struct {
    int n;
    int64_t t;
    double lr, beta1, beta2, eps;
    float *m, *v;
} Adam;
void adam_init(Adam *a, int n, double lr, double beta1, double beta2, double eps);
void adam_step(Adam *a, float *theta, const float *grad);
void adam_free(Adam *a);
#endif
