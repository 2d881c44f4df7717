"""The result columns every table and CSV shares; a module of constants, so the CLI's options load no pandas."""

ACC_COLUMNS = ("acc_all", "acc_many", "acc_medium", "acc_few")  # test accuracy: all classes, many/medium/few-shot
RESULT_COLUMNS = ("method", "dataset", "seed", "epoch", *ACC_COLUMNS)  # the leading columns of results.csv
#: training-label accuracy (pllzoo.metrics.label_accuracy): logged by methods with a label update of their own
LABEL_COLUMNS = ("label_acc", "label_acc_many", "label_acc_medium", "label_acc_few")
#: the trainer's own fields of a record after the accuracies, in results.csv's order (then the training-label
#: accuracies, then what components log in first-seen order; the columns an earlier results.csv of the folder had
#: come first, in its order, so a results.csv keeps its columns as runs of other methods, or newer runs, are added)
TRAINER_COLUMNS = ("stage", "stage_index", "epochs", "final_stage", "lr", "loss", "wall_s", "run", *LABEL_COLUMNS)
