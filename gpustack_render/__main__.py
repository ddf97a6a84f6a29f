from gpustack_render.cli import main

main()
