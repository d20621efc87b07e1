# The JAX that integrations/jax runs on, pinned once for the install-*.sh
# scripts that need it (sourced): jax 0.10.2 is the newest release for
# Python 3.11; the rest is what it resolved to. libtpu is the one the
# jax[tpu] extra pins, for deviceless TPU v4 compiles.
jax_pins=(
  "jax[tpu]==0.10.2" "jaxlib==0.10.2" "libtpu==0.0.42.1"
  "numpy==2.4.6" "ml_dtypes==0.6.0" "scipy==1.17.1" "opt_einsum==3.4.0"
)
