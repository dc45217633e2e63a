// Lint for faults, not style: eslint's recommended correctness rules plus the type-aware rules that catch
// what `tsc` lets through (a promise nobody awaits or handles, a promise passed where a callback's result
// is ignored, an await on a non-promise, a variable or import left behind). Formatting is not linted.
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";

export default defineConfig(
  {
    ignores: ["node_modules/**", "dist/**", "catalog/**", "docs/**", "deploy/**", "bench/results/**"],
  },
  {
    files: ["src/**/*.ts", "units/**/*.ts", "seeders/**/*.ts", "test/**/*.ts", "bench/**/*.ts", "examples/**/*.ts", "*.ts"],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    languageOptions: {
      parserOptions: {
        // One TypeScript program from tsconfig.json for every file: the type-aware rules need types, and
        // the project service reuses the program instead of building one per file.
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: {
      reportUnusedDisableDirectives: "error",
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/no-unnecessary-type-assertion": "error",
      "@typescript-eslint/no-unused-vars": [
        "error",
        {
          args: "after-used",
          argsIgnorePattern: "^_",
          varsIgnorePattern: "^_",
          caughtErrors: "all",
          caughtErrorsIgnorePattern: "^_",
          destructuredArrayIgnorePattern: "^_",
          ignoreRestSiblings: true,
        },
      ],
      "no-unreachable": "error",
      // A best-effort step (a kill of a process that may be gone, a log file that may not exist) ends
      // in an empty catch on purpose; any other empty block is still reported.
      "no-empty": ["error", { allowEmptyCatch: true }],
      // The control characters in this code's regular expressions are what they look for: terminal
      // and log output strips them, SQS bodies escape them.
      "no-control-regex": "off",
    },
  },
  {
    // Tests and benchmarks read parsed JSON, YAML and HTTP bodies field by field; `any` there is the
    // honest type. The service's own code keeps the rule.
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
