// One file, one worker: the suite's own test.concurrent cases are the only
// parallelism (the machine running it is small).
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["*.test.mjs"],
    fileParallelism: false,
    testTimeout: 30000,
    hookTimeout: 30000,
  },
})
