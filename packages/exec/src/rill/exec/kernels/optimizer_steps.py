"""The fused optimizer updates' arithmetic, one pure function per update:
`step(grad, var, *slots, *hyperparameters) -> (new var, *new slots)`, with TensorFlow's formulas
(training_ops' kernels) and few temporaries. A step never writes into its arguments, except the
`*_in_place` variants, which write into the state arrays they are given for the rows [lo, hi)
when every one of them may be written.

rill.exec.kernels.training_kernels applies them to variables (dense, chunk by chunk, or sparse
rows) under the variables' locks; the GPU kernels apply the same functions to device arrays.
"""

from __future__ import annotations

import numpy as np


def gradient_descent(g, v, alpha):
    out = np.multiply(g, alpha)
    return (np.subtract(v, out, out=out),)


def momentum(g, v, a0, lr, momentum, nesterov):
    a = np.multiply(a0, momentum)
    a += g
    if nesterov:  # var -= grad·lr + accum·momentum·lr
        out = np.multiply(a, momentum)
        out *= lr
        out += np.multiply(g, lr)
    else:
        out = np.multiply(a, lr)
    return np.subtract(v, out, out=out), a


def momentum_in_place(g, v, a, lr, momentum, nesterov, t):
    """momentum written into v and a, with the same operations in the same order."""
    a *= momentum
    a += g
    if nesterov:
        np.multiply(a, momentum, out=t)
        t *= lr
        t += np.multiply(g, lr)
    else:
        np.multiply(a, lr, out=t)
    v -= t


def gradient_descent_in_place(g, v, alpha, t):
    np.multiply(g, alpha, out=t)
    v -= t


def keras_momentum(g, v, a0, lr, momentum, nesterov):
    glr = np.multiply(g, lr)
    a = np.multiply(a0, momentum)
    a -= glr
    if nesterov:  # var += accum·momentum - grad·lr
        out = np.multiply(a, momentum)
        out -= glr
        return np.add(v, out, out=out), a
    return np.add(v, a, out=glr), a


def adagrad(g, v, a0, lr, update_slots):
    if update_slots:
        a = np.multiply(g, g)
        a += a0
    else:
        a = a0
    out = np.sqrt(a)
    np.divide(g, out, out=out)
    out *= lr
    return np.subtract(v, out, out=out), a


def adagrad_v2(g, v, a0, lr, epsilon, update_slots):
    if update_slots:
        a = np.multiply(g, g)
        a += a0
    else:
        a = a0
    out = np.sqrt(a)
    out += epsilon
    np.divide(g, out, out=out)
    out *= lr
    return np.subtract(v, out, out=out), a


def adadelta(g, v, a0, u0, lr, rho, epsilon):
    one_minus_rho = 1 - rho
    a = np.multiply(g, g)
    a *= one_minus_rho
    t = np.multiply(a0, rho)
    a += t
    # update = √(accum_update + ε) / √(accum + ε) · grad
    upd = np.add(u0, epsilon)
    np.sqrt(upd, out=upd)
    np.add(a, epsilon, out=t)
    np.sqrt(t, out=t)
    upd /= t
    upd *= g
    out = np.multiply(upd, lr)
    np.subtract(v, out, out=out)
    u = np.multiply(upd, upd, out=upd)
    u *= one_minus_rho
    u += np.multiply(u0, rho, out=t)
    return out, a, u


def rms_prop(g, v, ms0, mom0, lr, rho, momentum, epsilon):
    ms = np.multiply(g, g)
    ms -= ms0
    ms *= 1 - rho
    ms += ms0
    t = np.add(ms, epsilon)
    np.sqrt(t, out=t)
    mom = np.multiply(g, lr)
    mom /= t
    mom += np.multiply(mom0, momentum, out=t)
    return np.subtract(v, mom), ms, mom


def centered_rms_prop(g, v, mg0, ms0, mom0, lr, rho, momentum, epsilon):
    one_minus_rho = 1 - rho
    ms = np.multiply(g, g)
    ms -= ms0
    ms *= one_minus_rho
    ms += ms0
    mg = np.subtract(g, mg0)
    mg *= one_minus_rho
    mg += mg0
    t = np.multiply(mg, mg)
    np.subtract(ms, t, out=t)
    t += epsilon
    np.sqrt(t, out=t)
    mom = np.multiply(g, lr)
    mom /= t
    mom += np.multiply(mom0, momentum, out=t)
    return np.subtract(v, mom), mg, ms, mom


def adam(g, v, m0, v0, beta1_power, beta2_power, lr, beta1, beta2, epsilon, nesterov):
    alpha = lr * np.sqrt(1 - beta2_power) / (1 - beta1_power)
    m = np.subtract(g, m0)
    m *= 1 - beta1
    m += m0
    vv = np.multiply(g, g)
    vv -= v0
    vv *= 1 - beta2
    vv += v0
    denom = np.sqrt(vv)
    denom += epsilon
    if nesterov:  # var -= (grad·(1 - β1) + β1·m)·α / (√v + ε)
        out = np.multiply(m, beta1)
        out += np.multiply(g, 1 - beta1)
        out *= alpha
    else:
        out = np.multiply(m, alpha)
    out /= denom
    return np.subtract(v, out, out=out), m, vv


def ftrl(g, v, acc0, lin0, lr, l1, l2, l2_shrinkage, lr_power, multiply_linear_by_lr):
    acc = np.multiply(g, g)
    acc += acc0
    if lr_power == -0.5:
        p_new, p_old = np.sqrt(acc), np.sqrt(acc0)
    else:
        p_new, p_old = np.power(acc, -lr_power), np.power(acc0, -lr_power)
    sigma = np.subtract(p_new, p_old, out=p_old)
    sigma *= v
    lin = g if l2_shrinkage is None else np.multiply(v, 2 * l2_shrinkage) + g
    if multiply_linear_by_lr:
        # linear += grad'·lr - (accum'^-p - accum^-p)·var; var = (l1·lr·sign - linear) / y
        lin = np.multiply(lin, lr)
        lin -= sigma
        l1_lin, y = l1 * lr, p_new
        y += 2 * l2 * lr
    else:
        # linear += grad' - (accum'^-p - accum^-p) / lr·var; var = (l1·sign - linear) / y
        sigma /= lr
        lin = np.subtract(lin, sigma)
        l1_lin, y = l1, p_new
        y /= lr
        y += 2 * l2
    lin += lin0
    x = np.sign(lin)
    x *= l1_lin
    x -= lin
    with np.errstate(divide="ignore", invalid="ignore"):  # masked out below where y may be 0
        x /= y
    np.copyto(x, 0, where=~(np.abs(lin) > l1_lin))
    return x, acc, lin
